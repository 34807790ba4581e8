import pino from 'pino';
import { UpstreamHealth } from '../src/health/upstream-health';
import { tipFloorSampleTime } from '../src/inputs/tip-floor-poller';
import { followBundleResults } from '../src/upstream/bundle-results';
import type { BlockEngineTransport, BundleResultMessage } from '../src/upstream/block-engine';
import { Metrics } from '../src/metrics';

/** A clock the test moves by hand. */
function manualClock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}

describe('UpstreamHealth', () => {
  test('a connected stream that brings no slot for longer than the stall threshold is not healthy', () => {
    const clock = manualClock();
    const health = new UpstreamHealth(clock, new Metrics(), 10_000);
    health.mark('stream', true, null);
    health.slotSeen(true, true);
    clock.advance(10_000);
    expect(health.stream().ok).toBe(true);
    clock.advance(1);
    expect(health.stream()).toMatchObject({ ok: false, detail: 'connected, but no new slot for 10 s' });
    health.slotSeen(true, true);
    expect(health.stream().ok).toBe(true);
  });

  test('slots stall only when no source moved them; a slot from RPC keeps them moving while the stream is silent', () => {
    const clock = manualClock();
    const health = new UpstreamHealth(clock, new Metrics(), 5000);
    health.mark('stream', true, null);
    clock.advance(4000);
    health.slotSeen(false, true);
    clock.advance(4000);
    expect(health.slotsStalledMs()).toBe(0);
    expect(health.stream().ok).toBe(false);
    // A repeated (not higher) slot is not progress.
    clock.advance(2000);
    health.slotSeen(false, false);
    expect(health.slotsStalledMs()).toBe(6000);
  });

  test('marks keep the last good time across failures', () => {
    const clock = manualClock(5000);
    const health = new UpstreamHealth(clock, new Metrics(), 10_000);
    expect(health.get('rpc')).toEqual({ ok: false, detail: 'not contacted yet', last_ok_at: null });
    health.mark('rpc', true, null);
    clock.advance(300);
    health.mark('rpc', false, 'ECONNREFUSED');
    expect(health.get('rpc')).toEqual({ ok: false, detail: 'ECONNREFUSED', last_ok_at: 5000 });
  });
});

test('tipFloorSampleTime reads the newest sample of an answer, or null', () => {
  expect(tipFloorSampleTime([{ time: '2026-01-01T00:00:00Z' }, { time: '2026-01-01T00:00:05Z' }])).toBe(
    Date.parse('2026-01-01T00:00:05Z'),
  );
  expect(tipFloorSampleTime({ time: 'not a date' })).toBeNull();
  expect(tipFloorSampleTime([])).toBeNull();
});

describe('followBundleResults', () => {
  function fakeEngine() {
    const subscriptions: Array<{
      onResult: (r: BundleResultMessage) => void;
      onError: (e: Error) => void;
      stopped: boolean;
    }> = [];
    const engine = {
      kind: 'grpc',
      subscribeBundleResults(onResult: (r: BundleResultMessage) => void, onError: (e: Error) => void) {
        const sub = { onResult, onError, stopped: false };
        subscriptions.push(sub);
        return () => void (sub.stopped = true);
      },
    } as unknown as BlockEngineTransport;
    return { engine, subscriptions };
  }

  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test('delivers results, resubscribes a second after an error, and stop cancels the live stream', () => {
    const { engine, subscriptions } = fakeEngine();
    const seen: string[] = [];
    const follower = followBundleResults(engine, (r) => seen.push(r.bundleId), pino({ level: 'silent' }));
    expect(subscriptions).toHaveLength(1);
    subscriptions[0]!.onResult({ bundleId: 'a' });
    subscriptions[0]!.onError(new Error('stream reset'));
    jest.advanceTimersByTime(999);
    expect(subscriptions).toHaveLength(1);
    jest.advanceTimersByTime(1);
    expect(subscriptions).toHaveLength(2);
    subscriptions[1]!.onResult({ bundleId: 'b' });
    expect(seen).toEqual(['a', 'b']);
    follower.stop();
    expect(subscriptions[1]!.stopped).toBe(true);
    // An error after stop does not subscribe again.
    subscriptions[1]!.onError(new Error('late'));
    jest.advanceTimersByTime(5000);
    expect(subscriptions).toHaveLength(2);
  });

  test('a transport without a push channel follows nothing', () => {
    const follower = followBundleResults(
      { kind: 'jsonrpc' } as BlockEngineTransport,
      () => undefined,
      pino({ level: 'silent' }),
    );
    expect(() => follower.stop()).not.toThrow();
  });
});
