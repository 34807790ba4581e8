import {
  DEFAULT_POLICY,
  RelayError,
  type DecisionMode,
  type Policy,
  type PolicyView,
  type QueueResponse,
  type RelayEventMap,
  type StatusResponse,
  type SubmitRequest,
  type SubmitResponse,
  type TipResponse,
  type TxRecord,
} from '@solrelay/core';
import {
  RelayAgent,
  type AgentRelayClient,
  type PresenceChannel,
  type PresenceHandlers,
  type RelayAgentOptions,
} from '../../src';

type AnyHandler = (data: unknown) => void;

/**
 * A stand-in for the sidecar as the agent sees it through the client: events are emitted by the test, submits are
 * recorded (and can be refused), reads answer from fields the test sets. Only for unit tests of the agent's logic;
 * the e2e tests use the real sidecar.
 */
export class FakeRelay implements AgentRelayClient {
  readonly handlers = new Map<string, Set<AnyHandler>>();
  readonly submits: Array<SubmitRequest & { at: number }> = [];
  submitError: RelayError | null = null;
  policyValues: Policy = { ...DEFAULT_POLICY };
  decisionMode: DecisionMode = 'reflex';
  slot = 100;
  nextBundleEngineSlot: number | null = 100;
  floor: TipResponse = {
    p25: 5_000,
    p50: 10_000,
    p75: 40_000,
    p95: 500_000,
    p99: 1_500_000,
    ema: 9_000,
    stale: false,
    updated_at: Date.now(),
    source: 'tip_floor',
    age_ms: 0,
  };
  queueEntries: QueueResponse['entries'] = [];
  records = new Map<string, TxRecord>();

  on = ((event: string, handler: AnyHandler) => {
    let set = this.handlers.get(event);
    if (!set) this.handlers.set(event, (set = new Set()));
    set.add(handler);
    return () => set.delete(handler);
  }) as AgentRelayClient['on'];

  emit<K extends keyof RelayEventMap>(event: K, data: Omit<RelayEventMap[K], 'ts'>): void {
    for (const handler of this.handlers.get(event) ?? []) handler({ ts: Date.now(), ...data });
  }

  /** A `slot_update` moving the fake to `slot`, with the next bundle-engine slot. */
  advance(slot: number, nextBundleEngineSlot: number | null): void {
    this.slot = slot;
    this.nextBundleEngineSlot = nextBundleEngineSlot;
    this.emit('slot_update', {
      slot,
      leader: `leader-${slot}`,
      bundle_engine_leader: nextBundleEngineSlot === slot,
      next_bundle_engine_slot: nextBundleEngineSlot,
    });
  }

  enqueue(txId: string, extra: Partial<RelayEventMap['tx_enqueued']> = {}): void {
    this.emit('tx_enqueued', {
      tx_id: txId,
      slot: this.slot,
      priority: 'normal',
      expires_at_slot: this.slot + 150,
      max_tip: null,
      tip: 'auto',
      ...extra,
    });
  }

  async submit(input: Parameters<AgentRelayClient['submit']>[0]): Promise<SubmitResponse> {
    this.submits.push({ ...input, at: Date.now() } as SubmitRequest & { at: number });
    if (this.submitError) throw this.submitError;
    return {
      tx_id: input.tx_id,
      bundle_id: String(this.submits.length).padStart(64, '0'),
      tip_lamports: input.tip_lamports,
    };
  }

  async queue(): Promise<QueueResponse> {
    const by_state = { pending: 0, submitted: 0, landed: 0, processed: 0, confirmed: 0 };
    for (const entry of this.queueEntries) by_state[entry.state] += 1;
    return { pending: this.queueEntries.length, by_state, evicted_total: 0, entries: this.queueEntries };
  }

  async tx(txId: string): Promise<TxRecord> {
    const record = this.records.get(txId);
    if (!record) throw new RelayError('RELAY_E_TX_NOT_FOUND', { tx_id: txId });
    return record;
  }

  async policy(): Promise<PolicyView> {
    return { values: this.policyValues, overridden: [], entries: [], path: null, problems: [] };
  }

  async tip(): Promise<TipResponse> {
    return this.floor;
  }

  async mode(): Promise<{ decision_mode: DecisionMode }> {
    return { decision_mode: this.decisionMode };
  }

  async status(): Promise<StatusResponse> {
    return {
      slot: this.slot,
      leader: `leader-${this.slot}`,
      bundle_engine_leader: this.nextBundleEngineSlot === this.slot,
      next_bundle_engine_leader_slot: this.nextBundleEngineSlot,
    } as StatusResponse;
  }
}

/** A presence channel the test drives: `register(mode)` plays the sidecar's `registered` event. */
export class FakePresence implements PresenceChannel {
  handlers: PresenceHandlers | null = null;
  closed = false;

  open(handlers: PresenceHandlers): void {
    this.handlers = handlers;
  }

  close(): void {
    this.closed = true;
  }

  register(mode: DecisionMode): void {
    this.handlers?.registered({ decision_mode: mode, model: 'test-model', provider: 'test' });
  }
}

/** A log that keeps its lines. */
export function memoryLog(): {
  line(text: string): void;
  error(text: string): void;
  lines: string[];
  errors: string[];
} {
  const lines: string[] = [];
  const errors: string[] = [];
  return { line: (t) => lines.push(t), error: (t) => errors.push(t), lines, errors };
}

/** A `TxRecord` for watchdog tests. */
export function txRecord(txId: string, extra: Partial<TxRecord> = {}): TxRecord {
  return {
    tx_id: txId,
    state: 'pending',
    priority: 'normal',
    tip: 'auto',
    max_tip: null,
    enqueued_slot: 90,
    expires_at_slot: 240,
    tx_signatures: ['sig'],
    bundle_id: null,
    history: [],
    attempts: [],
    retries: 0,
    last_error: null,
    failure: null,
    ...extra,
  };
}

/**
 * Start a RelayAgent on fakes (no model unless given) and record it in `started`, so the test file can stop every
 * agent it started after each test.
 */
export async function startAgent(
  started: RelayAgent[],
  relay: FakeRelay,
  options: Partial<RelayAgentOptions> = {},
) {
  const log = memoryLog();
  const presence = new FakePresence();
  const agent = new RelayAgent({ client: relay, presence, model: null, log, ...options });
  started.push(agent);
  await agent.start();
  return { agent, log, presence };
}
