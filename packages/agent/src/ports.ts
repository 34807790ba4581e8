import type { RelayClient } from '@solrelay/client';
import type { DecisionMode, RelayError } from '@solrelay/core';
import type { DecisionSnapshot } from './snapshot';

/**
 * What the agent uses of `RelayClient`. A narrow pick so unit tests can pass a fake; production passes the real
 * client.
 */
export type AgentRelayClient = Pick<
  RelayClient,
  'on' | 'submit' | 'queue' | 'tx' | 'policy' | 'tip' | 'mode' | 'status'
>;

/** The `registered` event of `GET /internal/agent/presence`. */
export interface PresenceRegistration {
  decision_mode: DecisionMode;
  model: string;
  provider: string;
}

/** What a presence channel reports to the agent. */
export interface PresenceHandlers {
  /** The sidecar accepted the registration (first connect and every reconnect). */
  registered(registration: PresenceRegistration): void;
  /** `mode_changed` on the presence stream. */
  modeChanged(mode: DecisionMode): void;
  /** The connection dropped; the next attempt is made after `delay_ms`. */
  lost(info: { attempt: number; delay_ms: number; error: RelayError | null }): void;
  /** The sidecar refused the token (401). The channel has stopped: a token does not heal by retrying. */
  unauthorized?(error: RelayError): void;
}

/** The held-open registration (`GET /internal/agent/presence`). */
export interface PresenceChannel {
  open(handlers: PresenceHandlers): void;
  close(): void;
}

/** Token counts of one model reply (the Messages API's `usage`). */
export interface ModelUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens: number;
  cache_creation_input_tokens: number;
}

/** Why a model call gave no usable answer. */
export type ModelFailureReason =
  | 'timeout'
  | 'rate_limited'
  | 'overloaded'
  | 'server_error'
  | 'connection_error'
  | 'auth_error'
  | 'request_error'
  | 'refusal'
  | 'no_tool_call'
  /** Set by the agent, not an adapter: every model slot stayed taken until the decision's deadline. */
  | 'model_busy';

/** One model call's outcome: the raw tool input (checked by the agent), or why there is none. */
export type ModelResult =
  | {
      ok: true;
      tool_input: unknown;
      request_id: string | null;
      latency_ms: number;
      usage: ModelUsage | null;
      stop_reason: string | null;
    }
  | {
      ok: false;
      reason: ModelFailureReason;
      detail: string;
      request_id: string | null;
      latency_ms: number;
      usage: ModelUsage | null;
    };

/** The LLM behind the cortex tier and reflex escalations. */
export interface DecisionModel {
  readonly model: string;
  readonly provider: string;
  /** Ask for one decision. Must settle by `deadlineMs` (the agent also guards it) and never throw. */
  decide(request: { snapshot: DecisionSnapshot; deadlineMs: number }): Promise<ModelResult>;
}

/** Where the agent writes its lines: one event per line, plain text. */
export interface AgentLog {
  line(text: string): void;
  error(text: string): void;
}

/** Wall clock (Unix epoch ms). */
export interface Clock {
  now(): number;
}

/** Interval timers (the watchdog); injectable for fake-timer tests. */
export interface IntervalTimers {
  setInterval(callback: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: Clock = { now: () => Date.now() };

export const globalIntervalTimers: IntervalTimers = {
  setInterval: (callback, ms) => globalThis.setInterval(callback, ms),
  clearInterval: (handle) => globalThis.clearInterval(handle as ReturnType<typeof globalThis.setInterval>),
  setTimeout: (callback, ms) => globalThis.setTimeout(callback, ms),
  clearTimeout: (handle) => globalThis.clearTimeout(handle as ReturnType<typeof globalThis.setTimeout>),
};
