import type { StoredAttempt } from '../src/store/records';
import { blockOrderNeeded, creditedAttempt, tipsInUserSlot } from '../src/track/credit';

/** An attempt with only what `creditedAttempt` reads set meaningfully. */
function attempt(n: number, over: Partial<StoredAttempt> = {}): StoredAttempt {
  return {
    attempt: n,
    bundle_id: `bundle-${n}`,
    tip_lamports: 10_000,
    tip_tx: null,
    tip_signature: `tip-${n}`,
    tip_account: null,
    tip_last_valid_block_height: null,
    bundle_signatures: ['user', `tip-${n}`],
    created_at: 0,
    created_slot: 0,
    slot_submitted: 1,
    target_slot: null,
    window_end_slot: null,
    leader: null,
    stage: 'submitted',
    outcome: null,
    slot_landed: null,
    floor_at_submit: { p25: 0, p50: 0, p75: 0, p95: 0, p99: 0, ema: 0, stale: false },
    decision: {} as StoredAttempt['decision'],
    reserved_lamports: 0,
    released: false,
    leaked: false,
    timeline: {},
    send_errors: 0,
    ...over,
  } as StoredAttempt;
}

const statuses = (entries: Record<string, number>) =>
  new Map(Object.entries(entries).map(([signature, slot]) => [signature, { slot }]));

const tx = (attempts: StoredAttempt[], tip: 'auto' | 'included' = 'auto', signatures = ['user']) => ({
  signatures,
  attempts,
  tip,
});

test.each([
  {
    name: 'the attempt whose tip shares the user transaction slot',
    tx: tx([attempt(1), attempt(2)]),
    statuses: statuses({ user: 50, 'tip-1': 50 }),
    credited: 1,
  },
  {
    name: 'the latest of two whose tips both share the slot',
    tx: tx([attempt(1), attempt(2)]),
    statuses: statuses({ user: 50, 'tip-1': 50, 'tip-2': 50 }),
    credited: 2,
  },
  {
    // Attempt 2's bundle landed at 40, that slot was uncled, and its tip was re-broadcast on its own into slot 50,
    // where attempt 1's bundle (judged lost earlier, still at the engine) landed whole (issue #19's faults flake).
    name: 'not an attempt whose bundle landed in a slot that then died: its tip can only be re-broadcast alone',
    tx: tx([
      attempt(1, { stage: 'failed', outcome: 'dropped' }),
      attempt(2, { stage: 'failed', outcome: 'dropped', slot_landed: 40 }),
    ]),
    statuses: statuses({ user: 50, 'tip-1': 50, 'tip-2': 50 }),
    credited: 1,
  },
  {
    name: 'an attempt whose bundle landed whole again after its slot died, when no other tip is there',
    tx: tx([attempt(1, { stage: 'failed', outcome: 'dropped', slot_landed: 40 })]),
    statuses: statuses({ user: 50, 'tip-1': 50 }),
    credited: 1,
  },
  {
    name: 'the attempt that landed in this very slot, as recorded',
    tx: tx([attempt(1, { stage: 'processed', slot_landed: 50 })]),
    statuses: statuses({ user: 50, 'tip-1': 50 }),
    credited: 1,
  },
  {
    name: 'no one for a tip that landed alone in another slot',
    tx: tx([attempt(1)]),
    statuses: statuses({ user: 50, 'tip-1': 49 }),
    credited: null,
  },
  {
    name: 'no one for a leaked tip',
    tx: tx([attempt(1, { leaked: true })]),
    statuses: statuses({ user: 50, 'tip-1': 50 }),
    credited: null,
  },
  {
    name: 'no one while the user transactions of a bundle landed in different slots',
    tx: tx([attempt(1)], 'auto', ['user', 'user-2']),
    statuses: statuses({ user: 50, 'user-2': 51, 'tip-1': 50 }),
    credited: null,
  },
  {
    name: 'for "tip":"included", the latest attempt that went out',
    tx: tx(
      [attempt(1, { tip_signature: null }), attempt(2, { tip_signature: null, stage: 'journaled' })],
      'included',
    ),
    statuses: statuses({ user: 50 }),
    credited: 1,
  },
])('credits $name', ({ tx: record, statuses: read, credited }) => {
  expect(creditedAttempt(record, read)?.attempt ?? null).toBe(credited);
});

// Two tips in the user transactions' slot: statuses alone guess; the block's order decides.
test.each([
  {
    // The case statuses get wrong: attempt 2's uncled landing was never seen, so nothing prefers against it.
    name: 'the older attempt whose tip follows the user transaction, over a later tip re-broadcast alone',
    order: ['other', 'user', 'tip-1', 'x', 'tip-2'],
    credited: 1,
  },
  {
    name: 'the later attempt whose tip follows the user transaction',
    order: ['user', 'tip-2', 'tip-1'],
    credited: 2,
  },
  {
    // Re-broadcast one by one and landed apart: no bundle landed; both tips leaked.
    name: 'no one when no tip follows the user transaction',
    order: ['tip-1', 'user', 'other', 'tip-2'],
    credited: null,
  },
  {
    name: 'no one when the user transaction is the last of the block',
    order: ['tip-1', 'tip-2', 'user'],
    credited: null,
  },
])('with the block order, credits $name', ({ order, credited }) => {
  const record = tx([attempt(1), attempt(2)]);
  const read = statuses({ user: 50, 'tip-1': 50, 'tip-2': 50 });
  expect(tipsInUserSlot(record, read).map((a) => a.attempt)).toEqual([1, 2]);
  expect(creditedAttempt(record, read)?.attempt).toBe(2); // the guess
  expect(creditedAttempt(record, read, order)?.attempt ?? null).toBe(credited);
});

test('with the block order, the tip right after the user transactions of a multi-transaction bundle, contiguous', () => {
  const record = tx(
    [
      attempt(1, { bundle_signatures: ['user', 'user-2', 'tip-1'] }),
      attempt(2, { bundle_signatures: ['user', 'user-2', 'tip-2'] }),
    ],
    'auto',
    ['user', 'user-2'],
  );
  const read = statuses({ user: 50, 'user-2': 50, 'tip-1': 50, 'tip-2': 50 });
  expect(creditedAttempt(record, read, ['user', 'user-2', 'tip-1', 'tip-2'])?.attempt).toBe(1);
  expect(creditedAttempt(record, read, ['x', 'user', 'user-2', 'tip-2', 'tip-1'])?.attempt).toBe(2);
  // Split by another transaction: no bundle of them landed whole.
  expect(creditedAttempt(record, read, ['user', 'tip-1', 'user-2', 'tip-2'])).toBeNull();
});

test('with the block order, a packed bundle: the user transactions, its passengers, then its tip, contiguous', () => {
  // Attempt 2 carried two passengers (packing); attempt 1's tip was re-broadcast alone into the same slot.
  const record = tx([
    attempt(1, { stage: 'failed', outcome: 'dropped' }),
    attempt(2, { bundle_signatures: ['user', 'rider-a', 'rider-b', 'tip-2'] }),
  ]);
  const read = statuses({ user: 50, 'tip-1': 50, 'tip-2': 50 });
  expect(creditedAttempt(record, read, ['x', 'user', 'rider-a', 'rider-b', 'tip-2', 'tip-1'])?.attempt).toBe(
    2,
  );
  // The tip not right after the passengers: not that bundle; attempt 1's tip alone after the user's is no bundle
  // of attempt 1 either (its bundle is ['user', 'tip-1'], and that run is there: credited).
  expect(creditedAttempt(record, read, ['user', 'rider-a', 'tip-2', 'rider-b'])).toBeNull();
  expect(creditedAttempt(record, read, ['user', 'tip-1', 'rider-a', 'rider-b', 'tip-2'])?.attempt).toBe(1);
});

test.each<{ name: string; attempts: StoredAttempt[]; read: Record<string, number>; needed: boolean }>([
  {
    name: 'one tip in the user slot, no slot died',
    attempts: [attempt(1)],
    read: { 'tip-1': 50 },
    needed: false,
  },
  { name: 'no tip in the user slot', attempts: [attempt(1)], read: { 'tip-1': 49 }, needed: false },
  {
    name: 'two tips in the user slot',
    attempts: [attempt(1), attempt(2)],
    read: { 'tip-1': 50, 'tip-2': 50 },
    needed: true,
  },
  {
    // The fault-matrix case: attempt 1 landed at 48 (uncled), attempt 2 at 51 (uncled); the re-broadcasts put the
    // user transaction and attempt 1's tip into slot 52, apart: no bundle landed there.
    name: 'one tip in the user slot after an attempt landed in a slot that died',
    attempts: [attempt(1, { slot_landed: 48 }), attempt(2, { slot_landed: 51 })],
    read: { 'tip-1': 50, 'tip-2': 51 },
    needed: true,
  },
  {
    // Attempt 1's tip leaked earlier (its slot_landed is the leak's slot); attempt 2's tip alone is in the user slot.
    name: 'another attempt leaked or landed elsewhere, the one tip in the user slot did not',
    attempts: [attempt(1, { slot_landed: 45, leaked: true }), attempt(2)],
    read: { 'tip-1': 45, 'tip-2': 50 },
    needed: false,
  },
  {
    name: 'the one tip in the user slot landed there as recorded',
    attempts: [attempt(1, { slot_landed: 50 })],
    read: { 'tip-1': 50 },
    needed: false,
  },
])('the block order is needed: $needed for $name', ({ attempts, read, needed }) => {
  expect(blockOrderNeeded(tx(attempts), statuses({ user: 50, ...read }))).toBe(needed);
});
