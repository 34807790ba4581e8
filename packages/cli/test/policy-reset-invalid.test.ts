// `relay policy reset [<key>]` is the way back from a bad value, so it works on an invalid file (where `set` refuses):
// resetting the offending key, or every key, leaves a valid file, and `clear` (which throws away every other
// override) is not the only way out.
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { baseEnv, runRelay } from './helpers/relay-bin';

async function invalidPolicy(): Promise<{ env: Record<string, string>; file: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'relay-cli-policy-reset-'));
  const file = join(dir, 'relay.policy.json');
  await writeFile(file, JSON.stringify({ 'max-tip': 3_000_000, 'max-retries': -1 }));
  return { env: baseEnv({ RELAY_POLICY_FILE: file }), file };
}

test('policy reset <bad key> on an invalid file resets that key and keeps the other overrides', async () => {
  const { env, file } = await invalidPolicy();
  expect((await runRelay(['policy', 'validate'], { env })).code).toBe(1);
  const reset = await runRelay(['policy', 'reset', 'max-retries'], { env });
  expect(reset.stderr).toBe('');
  expect(reset.code).toBe(0);
  expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ 'max-tip': 3_000_000 });
  expect((await runRelay(['policy', 'validate'], { env })).code).toBe(0);
});

test('policy reset (every key) on an invalid file leaves a valid, default policy', async () => {
  const { env } = await invalidPolicy();
  const reset = await runRelay(['policy', 'reset'], { env });
  expect(reset.code).toBe(0);
  expect((await runRelay(['policy', 'validate'], { env })).code).toBe(0);
});

test('policy reset <key> still refuses when the file would stay invalid, and leaves it untouched', async () => {
  const { env, file } = await invalidPolicy();
  const twoBad = JSON.stringify({ 'max-tip': -5, 'max-retries': -1 });
  await writeFile(file, twoBad);
  const reset = await runRelay(['policy', 'reset', 'max-retries'], { env });
  expect(reset.code).toBe(1);
  expect(reset.stderr).toContain('unchanged');
  expect(reset.stderr).toContain('max-tip');
  expect(await readFile(file, 'utf8')).toBe(twoBad);
  // An unknown key is a usage error whatever the file holds.
  expect((await runRelay(['policy', 'reset', 'max-tips'], { env })).code).toBe(2);
});

test('policy reset on a file that is not JSON: one key is refused with a hint, every key works', async () => {
  const { env, file } = await invalidPolicy();
  await writeFile(file, '{ "max-tip": ');
  const one = await runRelay(['policy', 'reset', 'max-tip'], { env });
  expect(one.code).toBe(1);
  expect(one.stderr).toContain('not a JSON object');
  expect(one.stderr).toMatch(/hint: .*relay policy reset`/);
  const all = await runRelay(['policy', 'reset'], { env });
  expect(all.code).toBe(0);
  expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({});
});
