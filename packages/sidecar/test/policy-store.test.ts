import { mkdtemp, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PolicyStore } from '../src/policy/policy-store';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'relay-policy-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('a second save with the same size and the same timestamp is still taken in (the content decides)', async () => {
  const path = join(dir, 'policy.json');
  // Both saves get the same whole-second timestamp, as two saves in one timestamp tick do.
  const tick = Math.floor(Date.now() / 1000) - 60;
  await writeFile(path, JSON.stringify({ 'max-tip': 1_100_000 }));
  await utimes(path, tick, tick);
  const changes: number[] = [];
  const store = new PolicyStore(path, (change) => changes.push(change.values['max-tip']));
  await store.start({ watch: false });
  expect(store.current['max-tip']).toBe(1_100_000);

  // Same length, same inode, same modification time: only the bytes differ.
  const before = await stat(path);
  await writeFile(path, JSON.stringify({ 'max-tip': 1_200_000 }));
  await utimes(path, tick, tick);
  const after = await stat(path);
  expect([after.size, after.ino, after.mtimeMs]).toEqual([before.size, before.ino, before.mtimeMs]);
  await store.reload();
  expect(store.current['max-tip']).toBe(1_200_000);
  expect(changes.at(-1)).toBe(1_200_000);

  // And an unchanged file is not announced again.
  const announced = changes.length;
  await store.reload();
  expect(changes).toHaveLength(announced);
  store.stop();
});
