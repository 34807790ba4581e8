import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LOCK_FILE, lockDataDir } from '../src/runtime/data-dir-lock';

const dir = () => mkdtemp(join(tmpdir(), 'relay-lock-'));
const alive = (pids: number[]) => (pid: number) => pids.includes(pid);

test('a live holder makes the start fail with the directory and its pid; release frees it', async () => {
  const dataDir = await dir();
  const held = await lockDataDir(dataDir, 101, alive([101, 202]));
  expect(await readFile(join(dataDir, LOCK_FILE), 'utf8')).toBe('101\n');
  await expect(lockDataDir(dataDir, 202, alive([101, 202]))).rejects.toMatchObject({
    code: 'RELAY_E_CONFIG_DATA_DIR_IN_USE',
    details: { data_dir: dataDir, pid: 101 },
  });
  await held.release();
  const next = await lockDataDir(dataDir, 202, alive([101, 202]));
  expect(await readFile(join(dataDir, LOCK_FILE), 'utf8')).toBe('202\n');
  await next.release();
});

test.each([
  { name: 'a holder that is gone (a crash)', content: '303\n' },
  { name: 'a torn lock file (a crash mid-write)', content: '' },
  { name: 'garbage', content: 'not a pid' },
])('$name is taken over', async ({ content }) => {
  const dataDir = await dir();
  await writeFile(join(dataDir, LOCK_FILE), content);
  const lock = await lockDataDir(dataDir, 404, alive([404]));
  expect(await readFile(join(dataDir, LOCK_FILE), 'utf8')).toBe('404\n');
  await lock.release();
  await expect(readFile(join(dataDir, LOCK_FILE))).rejects.toMatchObject({ code: 'ENOENT' });
});

test('release leaves a lock that is no longer its own', async () => {
  const dataDir = await dir();
  const lock = await lockDataDir(dataDir, 505, alive([]));
  await writeFile(join(dataDir, LOCK_FILE), '606\n'); // taken over meanwhile (pid 505 looked dead to someone)
  await lock.release();
  expect(await readFile(join(dataDir, LOCK_FILE), 'utf8')).toBe('606\n');
});
