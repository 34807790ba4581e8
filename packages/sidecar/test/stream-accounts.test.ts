import { streamAccounts } from '../src/views/views';
import { attempt, tx } from './helpers/store-records';

// What the stream watches besides this host's tippers: the payers of "tip":"included" transactions (DESIGN §8) and,
// in a fleet, the other hosts' tippers (DESIGN §10, "Tippers").

test('payers of live "tip":"included" transactions are watched; those of terminal ones and of relay-tipped ones are not', () => {
  const accounts = streamAccounts(
    [
      tx('tx_included', 'sig-1', { tip: 'included', fee_payers: ['payer-a', 'payer-b'] }),
      tx('tx_done', 'sig-2', { tip: 'included', fee_payers: ['payer-c'], state: 'finalized' }),
      tx('tx_tipped', 'sig-3', { fee_payers: ['payer-d'] }),
    ],
    ['own-tipper'],
  );
  expect(accounts.sort()).toEqual(['payer-a', 'payer-b']);
});

test("an unsettled attempt signed by another host's tipper (adopted) is watched through that tipper; settled ones and this host's own are not", () => {
  const accounts = streamAccounts(
    [
      tx('tx_adopted', 'sig-1', {
        attempts: [attempt(1, 'b1', { tipper: 'tipper-of-host-a', stage: 'submitted' })],
      }),
      tx('tx_settled', 'sig-2', {
        attempts: [attempt(1, 'b2', { tipper: 'tipper-of-host-c', stage: 'failed' })],
      }),
      tx('tx_own', 'sig-3', { attempts: [attempt(1, 'b3', { tipper: 'own-tipper', stage: 'journaled' })] }),
    ],
    ['own-tipper'],
  );
  expect(accounts).toEqual(['tipper-of-host-a']);
});

test("the fleet's other tippers are watched before any of their work is adopted; this host's own are left to the static filter", () => {
  expect(streamAccounts([], ['own-tipper'], ['tipper-of-host-b', 'own-tipper']).sort()).toEqual([
    'tipper-of-host-b',
  ]);
});
