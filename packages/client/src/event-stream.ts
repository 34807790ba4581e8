import type { RelayError, RelayEventMap } from '@solrelay/core';
import { RELAY_EVENT_NAMES } from '@solrelay/core/wire';
import type { HttpTransport, RelayClientLogger } from './http';
import { reconnectDelay, type TimerHandle, type Timers } from './reconnect';
import { openSse, type SseConnection, type SseDrop } from './sse';

/**
 * The global stream's connection state:
 * - `idle`: nothing subscribed yet, no connection;
 * - `connecting`: a connection is being made;
 * - `open`: connected and receiving;
 * - `reconnecting`: the connection dropped; the next attempt is scheduled after `delay_ms`;
 * - `unauthorized`: the sidecar refused the token (401); the client stops instead of looping;
 * - `closed`: `close()` was called.
 */
export type ConnectionState = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'unauthorized' | 'closed';

/** Emitted as `connection` on every change of the global stream's state. */
export interface ConnectionStateEvent {
  state: ConnectionState;
  /** The reconnect attempt this state belongs to (1-based while reconnecting; 0 once open). */
  attempt: number;
  /** The wait before the next attempt when `reconnecting`, else null. */
  delay_ms: number | null;
  /** Why the last connection ended (or was refused), else null. */
  error: RelayError | null;
}

/**
 * What `RelayClient.on()` accepts: every sidecar event of core's `RelayEventMap`, plus the client's own
 * `connection` event. (`resync` is the sidecar's: resuming was impossible, so re-read state.)
 */
export interface RelayClientEventMap extends RelayEventMap {
  connection: ConnectionStateEvent;
}

export type RelayClientEventName = keyof RelayClientEventMap;

export type Handler<T> = (data: T) => void;

/**
 * The one persistent connection to `GET /internal/events`: reconnects on SPEC's schedule (500 ms doubling to a
 * 30 s cap, reset after each successful connect), resumes with `Last-Event-ID`, and stops on 401.
 */
export class EventStream {
  private state: ConnectionState = 'idle';
  private attempt = 0;
  private lastId: string | null = null;
  private connection: SseConnection | null = null;
  private timer: TimerHandle | null = null;
  private lastError: RelayError | null = null;

  constructor(
    private readonly http: HttpTransport,
    private readonly timers: Timers,
    private readonly logger: RelayClientLogger | undefined,
    private readonly emit: <K extends RelayClientEventName>(name: K, data: RelayClientEventMap[K]) => void,
    /** The stream's path (with its query: `?scope=host` for an agent, see `RelayClientOptions.eventScope`). */
    private readonly path = '/internal/events',
  ) {}

  get connectionState(): ConnectionState {
    return this.state;
  }

  /**
   * The id of the last event received (`<bootId>-<seq>`; on a sidecar on PostgreSQL the cursor `<xid>.<id>`), sent as
   * `Last-Event-ID` on reconnect.
   */
  get lastEventId(): string | null {
    return this.lastId;
  }

  /** The error that stopped or last interrupted the stream, if any. */
  get error(): RelayError | null {
    return this.lastError;
  }

  /** Connect if nothing is connected or scheduled yet (the first subscription calls this). */
  start(): void {
    if (this.state === 'idle') this.connect();
  }

  close(): void {
    if (this.state === 'closed') return;
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
    this.connection?.close();
    this.connection = null;
    this.setState('closed', null);
  }

  private connect(): void {
    this.timer = null;
    this.setState('connecting', null);
    this.connection = openSse(
      this.http,
      this.path,
      RELAY_EVENT_NAMES,
      this.lastId,
      {
        onOpen: () => {
          this.attempt = 0;
          this.setState('open', null);
        },
        onEvent: (name, data, id) => {
          if (id !== null) this.lastId = id;
          this.emit(name as keyof RelayEventMap, data as RelayEventMap[keyof RelayEventMap]);
        },
        onDrop: (drop) => this.dropped(drop),
      },
      this.logger,
    );
  }

  private dropped(drop: SseDrop): void {
    this.connection = null;
    this.lastError = drop.error;
    if (this.state === 'closed') return;
    if (drop.status === 401) {
      // A bad or missing token does not heal by retrying; looping would only hammer the sidecar.
      this.logger?.error?.(
        { code: drop.error.code },
        'relay client: event stream refused (401); not retrying',
      );
      this.setState('unauthorized', drop.error);
      return;
    }
    this.attempt += 1;
    const delay = reconnectDelay(this.attempt);
    this.logger?.debug?.(
      { attempt: this.attempt, delay_ms: delay, status: drop.status, code: drop.error.code },
      'relay client: event stream dropped; reconnecting',
    );
    this.setState('reconnecting', drop.error, delay);
    this.timer = this.timers.setTimeout(() => this.connect(), delay);
  }

  private setState(state: ConnectionState, error: RelayError | null, delay: number | null = null): void {
    this.state = state;
    this.emit('connection', { state, attempt: this.attempt, delay_ms: delay, error });
  }
}
