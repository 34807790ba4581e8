import { mkdtemp, appendFile, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LifecycleLog } from '../src/lifecycle/log';

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
