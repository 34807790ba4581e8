import { RelayClient, type ConnectionStateEvent, type RelayClientEventMap } from '@solrelay/client';
import {
  isRelayError,
  type AgentInfo,
  type DecisionMode,
  type LifecycleEntry,
  type QueueResponse,
  type RelayEventName,
  type StatusResponse,
  type TipResponse,
  type TxState,
} from '@solrelay/core';

/** How often the views are re-read; events keep the slot, mode and transaction states live in between. */
export const POLL_INTERVAL_MS = 1_500;
/** The event log keeps this many entries, so a long-open tab's memory stays bounded. */
export const EVENT_LOG_CAP = 200;
/** Tip-floor samples kept for the chart: at most one a second, so about 15 minutes. */
export const TIP_HISTORY_CAP = 900;
/** Transactions whose latest state is remembered from `tx_status_changed`. */
export const TX_STATE_CAP = 300;
/** Lifecycle entries read per poll. */
export const LIFECYCLE_LAST = 50;

/** Where the token lives between reloads of this tab (never in a URL, never in localStorage). */
const TOKEN_SESSION_KEY = 'relay.apiToken';

export type AuthState =
  /** No answer yet. */
  | 'unknown'
  /** The API answered. */
  | 'ok'
  /** The API answered 401 and no token was given yet. */
  | 'needs_token'
  /** The API answered 401 to the token we sent. */
  | 'token_refused';

export interface SlotView {
  slot: number;
  leader: string | null;
  bundle_engine_leader: boolean | null;
  next_bundle_engine_slot: number | null;
  /** When the browser saw it (epoch ms). */
  seen_at: number;
}

export interface TipSample {
  /** Seconds since the epoch (uPlot's x unit). */
  t: number;
  p25: number;
  p50: number;
  p75: number;
  p95: number;
  p99: number;
  ema: number;
}

export interface LogEntry {
  /** Increasing, for React keys. */
  seq: number;
  ts: number;
  event: RelayEventName | 'connection';
  tx_id: string | null;
  bundle_id: string | null;
  text: string;
  /** Colours the row: failures red, finalized green. */
  tone: 'neutral' | 'good' | 'bad' | 'warn';
}

export interface TxStateView {
  tx_id: string;
  state: TxState;
  failure: string | null;
  updated_at: number;
  /** When the browser received it (epoch ms), to tell it from an older or newer `/queue` read. */
  seen_at: number;
}

export interface DashboardState {
  auth: AuthState;
  connection: ConnectionStateEvent | null;
  status: StatusResponse | null;
  /** Why the last poll failed (sidecar unreachable, ...), cleared by the next good one. */
  pollError: string | null;
  lastPollAt: number | null;
  slot: SlotView | null;
  mode: DecisionMode | null;
  agent: AgentInfo | null;
  tip: TipResponse | null;
  tipHistory: TipSample[];
  queue: QueueResponse | null;
  /** When the read that gave `queue` was sent (browser epoch ms). */
  queueReadAt: number | null;
  /** Most recent first. */
  lifecycle: LifecycleEntry[];
  /** Most recent first. */
  txStates: TxStateView[];
  /** Most recent first, at most EVENT_LOG_CAP. */
  log: LogEntry[];
  /** Slot and tip ticks are counted rather than logged, so they cannot push real events out of the log. */
  tickCounts: { slot_update: number; tip_update: number };
}

const initialState: DashboardState = {
  auth: 'unknown',
  connection: null,
  status: null,
  pollError: null,
  lastPollAt: null,
  slot: null,
  mode: null,
  agent: null,
  tip: null,
  tipHistory: [],
  queue: null,
  queueReadAt: null,
  lifecycle: [],
  txStates: [],
  log: [],
  tickCounts: { slot_update: 0, tip_update: 0 },
};

function readSessionToken(): string | null {
  try {
    return sessionStorage.getItem(TOKEN_SESSION_KEY);
  } catch {
    return null; // storage disabled: the token lives in memory only
  }
}

function writeSessionToken(token: string | null): void {
  try {
    if (token === null) sessionStorage.removeItem(TOKEN_SESSION_KEY);
    else sessionStorage.setItem(TOKEN_SESSION_KEY, token);
  } catch {
    /* storage disabled: keep it in memory */
  }
}

function describeError(error: unknown): string {
  if (isRelayError(error)) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}

function isUnauthorized(error: unknown): boolean {
  return isRelayError(error) && error.status === 401;
}

/**
 * The dashboard's whole state, fed by the client's event stream and a poll of the read-only views. React reads
 * it through `useSyncExternalStore`; every update replaces the state object, so a snapshot never changes
 * under a render.
 */
export class DashboardStore {
  private state: DashboardState = initialState;
  private readonly listeners = new Set<() => void>();
  private client: RelayClient | null = null;
  private token: string | null;
  private pollTimer: ReturnType<typeof setTimeout> | null = null;
  private refreshSoonTimer: ReturnType<typeof setTimeout> | null = null;
  private running = false;
  private logSeq = 0;
  /** Bumped on every (re)connect so answers from a replaced client are ignored. */
  private generation = 0;

  constructor(private readonly baseUrl: string) {
    this.token = readSessionToken();
  }

  // ------------------------------------------------------------------ React binding

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  getSnapshot = (): DashboardState => this.state;

  private update(patch: Partial<DashboardState> | ((s: DashboardState) => Partial<DashboardState>)): void {
    const next = typeof patch === 'function' ? patch(this.state) : patch;
    this.state = { ...this.state, ...next };
    for (const listener of [...this.listeners]) listener();
  }

  // ------------------------------------------------------------------ lifecycle

  start(): void {
    if (this.running) return;
    this.running = true;
    this.connect();
  }

  stop(): void {
    this.running = false;
    this.disconnect();
  }

  /** Use this token from now on (the prompt's answer): kept in memory and this tab's session storage. */
  setToken(token: string): void {
    this.token = token.trim() || null;
    writeSessionToken(this.token);
    this.update({ auth: 'unknown' });
    this.disconnect();
    if (this.running) this.connect();
  }

  private connect(): void {
    this.generation += 1;
    const client = new RelayClient({ baseUrl: this.baseUrl, ...(this.token ? { token: this.token } : {}) });
    this.client = client;
    this.subscribeEvents(client);
    void this.poll(this.generation);
  }

  private disconnect(): void {
    this.generation += 1;
    if (this.pollTimer !== null) clearTimeout(this.pollTimer);
    if (this.refreshSoonTimer !== null) clearTimeout(this.refreshSoonTimer);
    this.pollTimer = null;
    this.refreshSoonTimer = null;
    // Forget the client before closing it, so its final `closed` event is recognised as ours and not logged.
    const client = this.client;
    this.client = null;
    client?.close();
  }

  /** The API refused us: stop polling and streaming until the operator gives a (new) token. */
  private unauthorized(): void {
    if (this.state.auth === 'needs_token' || this.state.auth === 'token_refused') return;
    this.disconnect();
    this.log(
      'connection',
      'bad',
      this.token ? 'the sidecar refused the API token (401)' : 'the sidecar needs an API token (401)',
      null,
      null,
    );
    this.update({ auth: this.token ? 'token_refused' : 'needs_token' });
  }

  // ------------------------------------------------------------------ actions

  async setMode(mode: DecisionMode): Promise<void> {
    const client = this.requireClient();
    const answer = await client.setMode(mode);
    this.update({ mode: answer.decision_mode });
  }

  /** One lifecycle entry, read fresh (the drill-down). */
  bundle(bundleId: string): Promise<LifecycleEntry> {
    return this.requireClient().bundle(bundleId);
  }

  /** A transaction's full record (the drill-down labels user and tip signatures with it). */
  tx(txId: string) {
    return this.requireClient().tx(txId);
  }

  private requireClient(): RelayClient {
    if (!this.client) throw new Error('not connected to the sidecar');
    return this.client;
  }

  // ------------------------------------------------------------------ polling

  private async poll(generation: number): Promise<void> {
    const client = this.client;
    if (!client || generation !== this.generation) return;
    const askedAt = Date.now();
    const [status, tip, queue, lifecycle] = await Promise.allSettled([
      client.status(),
      client.tip(),
      client.queue(),
      client.lifecycle({ last: LIFECYCLE_LAST }),
    ]);
    if (generation !== this.generation) return;
    const results = [status, tip, queue, lifecycle];
    const refused = results.find((r) => r.status === 'rejected' && isUnauthorized(r.reason));
    if (refused) {
      this.unauthorized();
      return;
    }
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    const now = Date.now();
    this.update((s) => {
      const patch: Partial<DashboardState> = {
        auth: failed && s.auth === 'unknown' ? s.auth : 'ok',
        pollError: failed ? describeError(failed.reason) : null,
        lastPollAt: now,
      };
      if (status.status === 'fulfilled') {
        const st = status.value;
        patch.status = st;
        patch.mode = st.decision_mode;
        // The poll only moves the slot forward; slot_update events are the finer-grained source.
        if (!s.slot || st.slot > s.slot.slot) {
          patch.slot = {
            slot: st.slot,
            leader: st.leader,
            bundle_engine_leader: st.bundle_engine_leader,
            next_bundle_engine_slot: st.next_bundle_engine_leader_slot,
            seen_at: now,
          };
        }
        if (!st.agent.connected) patch.agent = null;
      }
      if (tip.status === 'fulfilled') {
        patch.tip = tip.value;
        patch.tipHistory = appendTipSample(s.tipHistory, tip.value, now);
      }
      if (queue.status === 'fulfilled') {
        patch.queue = queue.value;
        patch.queueReadAt = askedAt;
      }
      if (lifecycle.status === 'fulfilled') patch.lifecycle = [...lifecycle.value.entries].reverse();
      return patch;
    });
    if (status.status === 'fulfilled') void this.refreshAgent(client, status.value, generation);
    this.pollTimer = setTimeout(() => void this.poll(generation), POLL_INTERVAL_MS);
  }

  /** `connected_since` is only in `/internal/agent/info`; read it when an agent is (newly) connected. */
  private async refreshAgent(client: RelayClient, status: StatusResponse, generation: number): Promise<void> {
    const known = this.state.agent;
    if (!status.agent.connected) return;
    if (known && known.model === status.agent.model && known.provider === status.agent.provider) return;
    try {
      const info = await client.agentInfo();
      if (generation === this.generation) this.update({ agent: info });
    } catch {
      /* the agent left between the two reads: the next poll says so */
    }
  }

  /** Re-read the views shortly after a state change, so the lifecycle table keeps up with the events. */
  private refreshSoon(): void {
    if (this.refreshSoonTimer !== null || !this.client) return;
    const generation = this.generation;
    this.refreshSoonTimer = setTimeout(() => {
      this.refreshSoonTimer = null;
      if (generation !== this.generation) return;
      if (this.pollTimer !== null) clearTimeout(this.pollTimer);
      this.pollTimer = null;
      void this.poll(generation);
    }, 200);
  }

  // ------------------------------------------------------------------ events

  private subscribeEvents(client: RelayClient): void {
    const on = <K extends keyof RelayClientEventMap>(
      name: K,
      handler: (data: RelayClientEventMap[K]) => void,
    ) => client.on(name, handler);

    on('connection', (e) => {
      if (client !== this.client) return; // a replaced client winding down
      const previous = this.state.connection?.state;
      this.update({ connection: e });
      if (e.state === 'unauthorized') {
        this.unauthorized();
        return;
      }
      if (e.state !== previous && e.state !== 'connecting') {
        const text =
          e.state === 'reconnecting'
            ? `event stream dropped; reconnecting in ${e.delay_ms ?? 0} ms (attempt ${e.attempt})`
            : `event stream ${e.state}`;
        this.log('connection', e.state === 'open' ? 'good' : 'warn', text, null, null);
      }
      // Back after a drop: events may have been missed if the sidecar could not replay them.
      if (e.state === 'open' && previous === 'reconnecting') this.refreshSoon();
    });

    on('slot_update', (e) => {
      this.update((s) => ({
        slot:
          s.slot && s.slot.slot > e.slot
            ? s.slot
            : {
                slot: e.slot,
                leader: e.leader,
                bundle_engine_leader: e.bundle_engine_leader,
                next_bundle_engine_slot: e.next_bundle_engine_slot,
                seen_at: Date.now(),
              },
        tickCounts: { ...s.tickCounts, slot_update: s.tickCounts.slot_update + 1 },
      }));
    });

    on('tip_update', (e) => {
      this.update((s) => ({
        tip: { ...e },
        tipHistory: appendTipSample(s.tipHistory, e, Date.now()),
        tickCounts: { ...s.tickCounts, tip_update: s.tickCounts.tip_update + 1 },
      }));
    });

    on('tx_enqueued', (e) => {
      this.trackTx(e.tx_id, 'pending', null, e.ts);
      const cap = e.max_tip === null ? '' : `, max tip ${e.max_tip}`;
      this.log(
        'tx_enqueued',
        'neutral',
        `enqueued at slot ${e.slot}, ${e.priority} priority, tip ${e.tip}${cap}, expires after slot ${e.expires_at_slot}`,
        e.tx_id,
        null,
      );
      this.refreshSoon();
    });

    on('submit_requested', (e) => {
      this.log(
        'submit_requested',
        'neutral',
        `submit at tip ${e.tip_lamports} lamports — ${e.reason}`,
        e.tx_id,
        e.bundle_id,
      );
      this.refreshSoon();
    });

    on('tx_status_changed', (e) => {
      this.trackTx(e.tx_id, e.state, e.failure, e.ts);
      const tone =
        e.state === 'finalized' ? 'good' : e.state === 'failed' || e.state === 'expired' ? 'bad' : 'neutral';
      this.log(
        'tx_status_changed',
        tone,
        `→ ${e.state}${e.failure ? ` (${e.failure})` : ''}`,
        e.tx_id,
        e.bundle_id,
      );
      this.refreshSoon();
    });

    on('bundle_settled', (e) => {
      this.log(
        'bundle_settled',
        e.stage === 'finalized' ? 'good' : 'bad',
        `bundle ${e.stage}${e.failure_type ? ` (${e.failure_type})` : ''}, tip ${e.tip_lamports}, retries ${e.retries}`,
        e.tx_id,
        e.bundle_id,
      );
      this.refreshSoon();
    });

    on('mode_changed', (e) => {
      this.update({ mode: e.decision_mode });
      this.log('mode_changed', 'warn', `decision mode ${e.previous} → ${e.decision_mode}`, null, null);
    });

    on('agent_presence', (e) => {
      this.update((s) => ({
        agent:
          e.connected && e.model && e.provider
            ? { model: e.model, provider: e.provider, connected_since: e.ts }
            : null,
        status: s.status
          ? { ...s.status, agent: { connected: e.connected, model: e.model, provider: e.provider } }
          : s.status,
      }));
      const who = [e.model, e.provider].filter(Boolean).join(' / ') || 'agent';
      this.log(
        'agent_presence',
        e.connected ? 'good' : 'warn',
        `${who} ${e.connected ? 'connected' : 'left'}`,
        null,
        null,
      );
    });

    on('policy_changed', (e) => {
      const text = e.ok
        ? `policy reloaded${e.overridden.length ? `; overridden: ${e.overridden.join(', ')}` : ''}`
        : `policy file refused (${e.problems.length} problem${e.problems.length === 1 ? '' : 's'}); last good policy stays`;
      this.log('policy_changed', e.ok ? 'neutral' : 'bad', text, null, null);
    });

    on('resync', (e) => {
      // The sidecar could not replay what we missed: what we hold may be stale, so read everything again.
      this.log('resync', 'warn', `resync (${e.reason}): re-reading state`, null, null);
      this.refreshSoon();
    });
  }

  private trackTx(txId: string, state: TxState, failure: string | null, ts: number): void {
    this.update((s) => {
      const rest = s.txStates.filter((t) => t.tx_id !== txId);
      const seen = { tx_id: txId, state, failure, updated_at: ts, seen_at: Date.now() };
      return { txStates: [seen, ...rest].slice(0, TX_STATE_CAP) };
    });
  }

  private log(
    event: LogEntry['event'],
    tone: LogEntry['tone'],
    text: string,
    txId: string | null,
    bundleId: string | null,
  ): void {
    this.logSeq += 1;
    const entry: LogEntry = {
      seq: this.logSeq,
      ts: Date.now(),
      event,
      tx_id: txId,
      bundle_id: bundleId,
      text,
      tone,
    };
    this.update((s) => ({ log: [entry, ...s.log].slice(0, EVENT_LOG_CAP) }));
  }
}

/**
 * Adds a tip-floor observation to the chart's history: at most one point a second (the poll and `tip_update`
 * both report), capped so a tab left open for days stays small.
 */
export function appendTipSample(history: TipSample[], tip: TipResponse, nowMs: number): TipSample[] {
  const t = Math.floor(nowMs / 1_000);
  const sample: TipSample = {
    t,
    p25: tip.p25,
    p50: tip.p50,
    p75: tip.p75,
    p95: tip.p95,
    p99: tip.p99,
    ema: tip.ema,
  };
  const last = history[history.length - 1];
  const base = last && last.t === t ? history.slice(0, -1) : history;
  const next = [...base, sample];
  return next.length > TIP_HISTORY_CAP ? next.slice(next.length - TIP_HISTORY_CAP) : next;
}
