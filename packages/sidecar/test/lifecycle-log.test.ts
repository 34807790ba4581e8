import { mkdtemp, appendFile, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LifecycleLog, midWriteCut } from '../src/lifecycle/log';

type Entry = { bundle_id: string; stage: string; n: number };

async function logPath(): Promise<string> {
  return join(await mkdtemp(join(tmpdir(), 'relay-lifecycle-')), 'nested', 'lifecycle.jsonl');
}

test('each stage change is a whole line; the latest line of a bundle is its entry', async () => {
  const path = await logPath();
  const { log } = await LifecycleLog.open<Entry>(path);
  await log.append({ bundle_id: 'b1', stage: 'submitted', n: 1 });
  await log.append({ bundle_id: 'b2', stage: 'submitted', n: 2 });
  await log.append({ bundle_id: 'b1', stage: 'landed', n: 3 });
  expect(log.get('b1')).toEqual({ bundle_id: 'b1', stage: 'landed', n: 3 });
  // Ordered by submission (first entry), each at its latest stage: b1 was submitted first.
  expect(log.recent(10).map((e) => e.n)).toEqual([3, 2]);
  expect(log.recent(1)[0]!.bundle_id).toBe('b2');
  await log.close();
  const lines = (await readFile(path, 'utf8')).trim().split('\n');
  expect(lines).toHaveLength(3);
  const { log: reopened, recovery } = await LifecycleLog.open<Entry>(path);
  expect(recovery.entriesIndexed).toBe(2);
  expect(reopened.get('b1')!.stage).toBe('landed');
  expect(reopened.recent(1)[0]!.bundle_id).toBe('b2');
  await reopened.close();
});

test('a torn last line is skipped with a warning and cut, so the next entry is readable', async () => {
  const path = await logPath();
  const { log } = await LifecycleLog.open<Entry>(path);
  await log.append({ bundle_id: 'b1', stage: 'submitted', n: 1 });
  await log.close();
  await appendFile(path, '{"bundle_id":"b2","sta');
  const { log: reopened, recovery } = await LifecycleLog.open<Entry>(path);
  expect(recovery.warnings.join()).toMatch(/torn last line/);
  expect(reopened.get('b2')).toBeUndefined();
  await reopened.append({ bundle_id: 'b3', stage: 'submitted', n: 3 });
  await reopened.close();
  const lines = (await readFile(path, 'utf8')).trim().split('\n');
  expect(lines.map((l) => JSON.parse(l).bundle_id)).toEqual(['b1', 'b3']);
});

test('the index stays bounded; evicted bundles are still found by scanning the file', async () => {
  const path = await logPath();
  const { log } = await LifecycleLog.open<Entry>(path, { indexSize: 50 });
  for (let i = 0; i < 200; i++) void log.append({ bundle_id: `b${i}`, stage: 'finalized', n: i });
  await log.drain();
  expect(log.size).toBe(50);
  expect(log.get('b10')).toBeUndefined();
  expect(await log.find('b10')).toEqual({ bundle_id: 'b10', stage: 'finalized', n: 10 });
  expect(await log.find('nope')).toBeUndefined();
  await log.close();
});

test('start-up reads only the tail of a large file', async () => {
  const path = await logPath();
  const { log } = await LifecycleLog.open<Entry>(path);
  for (let i = 0; i < 1000; i++) void log.append({ bundle_id: `b${i}`, stage: 'finalized', n: i });
  await log.close();
  const { log: reopened, recovery } = await LifecycleLog.open<Entry>(path, { tailBytes: 2000 });
  expect(recovery.entriesIndexed).toBeGreaterThan(0);
  expect(recovery.entriesIndexed).toBeLessThan(60);
  expect(recovery.warnings).toEqual([]);
  expect(reopened.recent(1)[0]!.n).toBe(999);
  expect((await reopened.find('b0'))!.n).toBe(0);
  await reopened.close();
});

test('the index says whether it covers the whole file (eviction or a tail-only start-up make it partial)', async () => {
  const path = await logPath();
  const { log } = await LifecycleLog.open<Entry>(path, { indexSize: 5 });
  for (let i = 0; i < 5; i++) void log.append({ bundle_id: `b${i}`, stage: 'finalized', n: i });
  await log.drain();
  expect(log.indexesWholeFile).toBe(true);
  expect(log.oldest()!.bundle_id).toBe('b0');
  await log.append({ bundle_id: 'b5', stage: 'submitted', n: 5 });
  expect(log.indexesWholeFile).toBe(false);
  expect(log.oldest()!.bundle_id).toBe('b1');
  await log.close();
  const { log: whole } = await LifecycleLog.open<Entry>(path);
  expect(whole.indexesWholeFile).toBe(true);
  await whole.close();
  const { log: tail } = await LifecycleLog.open<Entry>(path, { tailBytes: 60 });
  expect(tail.indexesWholeFile).toBe(false);
  await tail.close();
});

describe('the lifecycle.mid-write crash point', () => {
  /** A hook that "crashes" (throws, so the second write never happens) at the first mid-write. */
  function crashingHook(armed: (name: string) => boolean) {
    const calls: string[] = [];
    const hook = Object.assign(
      (name: 'lifecycle.mid-write') => {
        calls.push(name);
        throw new Error(`crashed at ${name}`);
      },
      { armed },
    );
    return { hook, calls };
  }

  test.each([1, 2, 3, 4])(
    'a crash there with %i equal-length lines in the batch leaves a torn last line, cut and reported at start-up',
    async (count) => {
      const path = await logPath();
      const { log } = await LifecycleLog.open<Entry>(path);
      await log.append({ bundle_id: 'b0', stage: 'submitted', n: 0 });
      await log.close();
      const before = (await readFile(path)).length;

      const { hook, calls } = crashingHook((name) => name === 'lifecycle.mid-write');
      const { log: crashing } = await LifecycleLog.open<Entry>(path, { crashPoint: hook });
      // Appended in one turn: one batch, one flush. Equal lengths: a cut at half the batch would land on a newline.
      const entries = Array.from({ length: count }, (_, i) => ({
        bundle_id: `c${i}`,
        stage: 'landed',
        n: i + 1,
      }));
      const written = await Promise.allSettled(entries.map((e) => crashing.append(e)));
      expect(calls).toEqual(['lifecycle.mid-write']);
      expect(written.every((w) => w.status === 'rejected')).toBe(true);

      const lineBytes = Buffer.byteLength(JSON.stringify(entries[0]) + '\n');
      const text = await readFile(path, 'utf8');
      const torn = text.length - text.lastIndexOf('\n') - 1;
      // Every line of the batch but the last is whole; the last is cut inside, past its first byte.
      expect(torn).toBe(Math.floor(lineBytes / 2));
      expect(torn).toBeGreaterThan(0);
      expect(Buffer.byteLength(text)).toBe(before + (count - 1) * lineBytes + torn);
      await crashing.close();

      const { log: reopened, recovery } = await LifecycleLog.open<Entry>(path);
      expect(recovery.warnings).toEqual([
        `lifecycle log: skipped a torn last line (${torn} bytes) left by a crash`,
      ]);
      expect(reopened.size).toBe(count); // b0 and the whole lines c0..c(count-2)
      expect(reopened.get(`c${count - 1}`)).toBeUndefined();
      await reopened.close();
      expect((await readFile(path, 'utf8')).endsWith('\n')).toBe(true);
    },
  );

  test('the cut is inside the last line for lines of any length, multi-byte characters included', () => {
    for (const sizes of [[2], [2, 2], [10, 10, 10, 10], [3, 200], [200, 3], [7, 8, 9]]) {
      const lines = sizes.map((n) => Buffer.from('é'.repeat(n) + '\n'));
      const total = lines.reduce((a, l) => a + l.length, 0);
      const lastStart = total - lines[lines.length - 1]!.length;
      const cut = midWriteCut(lines);
      expect(cut).toBeGreaterThan(lastStart);
      expect(cut).toBeLessThan(total);
    }
  });

  test('a hook armed for other points is never called and leaves the writes whole', async () => {
    const path = await logPath();
    const { hook, calls } = crashingHook((name) => name === 'attempt.sent');
    const { log } = await LifecycleLog.open<Entry>(path, { crashPoint: hook });
    await Promise.all([
      log.append({ bundle_id: 'b1', stage: 'submitted', n: 1 }),
      log.append({ bundle_id: 'b2', stage: 'submitted', n: 2 }),
    ]);
    await log.close();
    expect(calls).toEqual([]);
    expect(log.counters).toEqual({ appended: 2, writeErrors: 0 });
    const { log: reopened, recovery } = await LifecycleLog.open<Entry>(path);
    expect(recovery.warnings).toEqual([]);
    expect(reopened.size).toBe(2);
    await reopened.close();
  });
});
