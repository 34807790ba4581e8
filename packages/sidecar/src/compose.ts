import { LandedShare } from '@solrelay/core';
import { AttemptBuilder } from './attempts/builder';
import { createPorts, type RelayOptions, type RelayPorts } from './context';
import { BypassDecider } from './deciders/bypass';
import { FallbackDecider } from './deciders/fallback';
import { Intake } from './intake/intake';
import { Operator } from './operator/operator';
import { TipperPool } from './operator/tippers';
import { OutageGate } from './recovery/outage';
import { Recovery } from './recovery/resume';
import { SlotTick } from './runtime/slot-tick';
import { FirstSends } from './send/first-send';
import { Packer } from './send/packer';
import { SendQueue } from './send/queue';
import { Sender } from './send/sender';
import { Expiry } from './settle/expiry';
import { Settler } from './settle/settle';
import type { StoredAttempt } from './store/records';
import { Evaluator } from './track/evaluate';
import { FaultApplier } from './track/fault';
import { Tracker } from './track/tracker';
import { SEND_PACING } from './upstream/engine-regions';

/** Every stage of one relay, wired. */
export interface RelayStages {
  ports: RelayPorts;
  operator: Operator;
  tippers: TipperPool;
  intake: Intake;
  bypass: BypassDecider;
  fallback: FallbackDecider;
  attempts: AttemptBuilder;
  queue: SendQueue;
  firstSends: FirstSends;
  packer: Packer;
  sender: Sender;
  tracker: Tracker;
  settler: Settler;
  recovery: Recovery;
  /** After a database outage: no new tip until the database holds every tip relay sent, or the rest are settled. */
  outage: OutageGate;
  slotTick: SlotTick;
  /** Stop sending and tracking; timers end. */
  close(): void;
}

/**
 * The composition: builds each stage over the narrow ports it declares and wires them, one way along a
 * transaction's path (intake → deciders → attempts → send → track → settle). Where two parts need each other, the
 * wiring is explicit here: the send queue and its sender (`queue.attach`), and what settlement tells the rest
 * (`signals`: bypass retries what is pending again; the first-send records and the packer let go of an attempt that
 * ended). Nothing else creates a stage.
 */
export function composeRelay(o: RelayOptions): RelayStages {
  const { ports, close: closePorts } = createPorts(o);
  const settler = new Settler(ports);
  const operator = new Operator(ports);
  const tippers = new TipperPool(ports, o.tippers);
  const queue = new SendQueue({
    now: ports.now,
    policy: o.policy,
    ratePerSecond: o.bundleEngineRps,
    pacing: SEND_PACING,
    regions: o.engine.size,
    // The region of the bundle-engine leader a bundle sent now targets: its budget is spent first.
    preferredRegion: () => {
      const next = o.leaders.nextBundleEngineSlot(ports.chain.slot, 64);
      return next === null ? null : o.engine.indexOf(o.leaders.regionAt(next));
    },
    log: o.log,
    isClosed: ports.isClosed,
    // Through a consensus migration window no bundle goes out (DESIGN §12): its blocks pack no user transactions.
    hold: () => ports.chain.consensus.snapshot().holdSends,
    onHeld: () => ports.metrics.sendsHeldForMigration.inc(),
    // A pack's worth; this host's transactions accepted in the last two seconds and not yet decided (a burst's
    // decisions follow its accepts within a second; the intake adds each, the first attempt's journaling or a terminal
    // state removes it); and whether a job can carry riders: an unsent first send with relay's tip.
    fill: {
      perBundle: o.packMaxTransactions ?? 1,
      undecided: () => ports.enqueuedAt.undecided(performance.now()),
      canCarry: (job) => firstSends.isUnsent(job.txId, job.attempt),
    },
  });
  const firstSends = new FirstSends(ports, (tipper) => tippers.signerOf(tipper));
  const packer = new Packer(
    ports,
    queue,
    o.packMaxTransactions ?? 1,
    (txId, n) => firstSends.isUnsent(txId, n),
    tippers,
  );
  // Relay's own tip transaction failing is an operator fault: its tipper is held, the user's transaction waits.
  const tipFailed = (attempt: StoredAttempt, detail: string) => tippers.tipFailed(attempt, detail);
  // Whose fault a lost attempt was is judged in one place (track/fault.ts) and applied here, for every source.
  const faults = new FaultApplier({
    settleFailed: (tx, attempt, outcome, options) => settler.settleFailed(tx, attempt, outcome, options),
    packing: packer,
    onTipFailed: tipFailed,
    forgetBlockhash: () => o.rpc.forgetBlockhash(),
  });
  // An attempt's first send: a tip that aged in the queue is signed again, then waiting transactions may ride.
  const sender = new Sender(ports, settler, queue, packer, faults, async (tx, attempt) => {
    if (!firstSends.take(tx.tx_id, attempt.attempt)) return attempt;
    return packer.pack(tx, await firstSends.freshenTip(tx, attempt));
  });
  queue.attach((job, turn) => sender.sendOne(job, turn));
  const outage = new OutageGate(ports, queue, packer);
  const attempts = new AttemptBuilder(ports, operator, tippers, queue, firstSends, outage);
  const bypass = new BypassDecider(ports, attempts);
  const fallback = new FallbackDecider(ports, attempts, settler);
  // Admission sells what lands (issue 30, point 5): the recent share of settled bundles that landed.
  const landedShare = new LandedShare();
  settler.signals.on('bundle-settled', ({ landed }) => landedShare.observe(landed, ports.now()));
  const intake = new Intake(
    ports,
    bypass,
    () => queue.regionsTakingBundles(),
    () => packer.transactionsPerBundle,
    () => landedShare.value(ports.now()),
  );
  const tracker = new Tracker(
    ports,
    settler,
    new Evaluator(ports, settler, faults, packer),
    new Expiry(ports, settler),
    faults,
  );
  const recovery = new Recovery(ports, queue, bypass, packer);
  const slotTick = new SlotTick(ports, {
    capacity: () => intake.capacity(),
    fallbackActive: () => operator.fallbackActive,
    runFallback: () => fallback.run(),
    sweepBypass: () => bypass.sweep(),
  });

  // Settlement never calls a decider or a sender: they listen. An attempt that settled is never sent (forget it,
  // and let go of the passengers it carried); bypass retries at once what is pending again.
  settler.signals.on('attempt-ended', ({ txId, attempt }) => {
    firstSends.forget(txId, attempt);
    packer.release(txId, attempt);
  });
  bypass.subscribe(settler.signals);

  return {
    ports,
    operator,
    tippers,
    intake,
    bypass,
    fallback,
    attempts,
    queue,
    firstSends,
    packer,
    sender,
    tracker,
    settler,
    recovery,
    outage,
    slotTick,
    close: () => {
      closePorts();
      outage.stop();
      queue.close();
      packer.close();
    },
  };
}
