/**
 * The model call: one decision's question to the model, bounded in time however the model and the other decisions
 * behave. Calls share a fixed number of model slots (`ConcurrencyLimiter`); a decision waits for a slot only until
 * its deadline, and the call gets what is left of it. The result always settles, never throws: a failure is a
 * `ModelResult` with a reason, which the agent turns into a reflex fallback.
 */
import { ConcurrencyLimiter } from './limiter';
import { messageOf } from './log-text';
import type { Clock, DecisionModel, IntervalTimers, ModelResult } from './ports';
import type { DecisionSnapshot } from './snapshot';

/** Extra time past the deadline before the agent stops waiting for a model adapter that ignores its own deadline. */
const DEADLINE_GRACE_MS = 250;

/** Asks the model under a deadline and a limit on calls in flight (decisions without the model never wait). */
export class BoundedModelCalls {
  private readonly limiter: ConcurrencyLimiter;

  constructor(
    maxConcurrentCalls: number,
    private readonly clock: Clock,
    private readonly timers: IntervalTimers,
  ) {
    this.limiter = new ConcurrencyLimiter(maxConcurrentCalls);
  }

  /**
   * A model call that ends by `deadlineAtMs` (agent clock) however busy the model is: it waits for a free slot
   * only until the deadline (then `model_busy`), and the call itself gets what is left of the deadline.
   */
  async askWithin(
    model: DecisionModel,
    snapshot: DecisionSnapshot,
    deadlineMs: number,
    deadlineAtMs: number,
  ): Promise<ModelResult> {
    const queuedAtMs = this.clock.now();
    const failed = (reason: 'model_busy' | 'timeout', detail: string): ModelResult => ({
      ok: false,
      reason,
      detail,
      request_id: null,
      latency_ms: this.clock.now() - queuedAtMs,
      usage: null,
    });
    if (deadlineAtMs - queuedAtMs <= 0)
      return failed('timeout', `the ${deadlineMs} ms deadline passed before the model was asked`);
    let giveUpTimer: unknown = null;
    const giveUp = new Promise<void>((resolve) => {
      giveUpTimer = this.timers.setTimeout(resolve, deadlineAtMs - queuedAtMs);
    });
    try {
      const run = await this.limiter.runBefore(giveUp, () =>
        this.ask(model, snapshot, Math.max(1, deadlineAtMs - this.clock.now())),
      );
      return run.ran
        ? run.value
        : failed('model_busy', `no free model slot within the ${deadlineMs} ms deadline`);
    } finally {
      this.timers.clearTimeout(giveUpTimer);
    }
  }

  /** One model call under a hard deadline: the adapter's own signal, and this guard in case it ignores it. */
  private async ask(
    model: DecisionModel,
    snapshot: DecisionSnapshot,
    deadlineMs: number,
  ): Promise<ModelResult> {
    const started = this.clock.now();
    let timer: unknown = null;
    const guard = new Promise<ModelResult>((resolve) => {
      timer = this.timers.setTimeout(
        () =>
          resolve({
            ok: false,
            reason: 'timeout',
            detail: `no answer within ${deadlineMs} ms`,
            request_id: null,
            latency_ms: this.clock.now() - started,
            usage: null,
          }),
        deadlineMs + DEADLINE_GRACE_MS,
      );
    });
    const call = model.decide({ snapshot, deadlineMs }).catch((error: unknown): ModelResult => ({
      ok: false,
      reason: 'request_error',
      detail: messageOf(error),
      request_id: null,
      latency_ms: this.clock.now() - started,
      usage: null,
    }));
    try {
      return await Promise.race([call, guard]);
    } finally {
      this.timers.clearTimeout(timer);
    }
  }
}
