import { mkdtemp, readFile, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { baseEnv, runRelay } from './helpers/relay-bin';

// Every policy command on a policy file in a fresh temp directory, no sidecar needed.
let dir: string;
let policyFile: string;
let env: Record<string, string>;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'relay-cli-policy-'));
  policyFile = join(dir, 'relay.policy.json');
  env = baseEnv({ RELAY_POLICY_FILE: policyFile });
});

const readPolicy = async () => JSON.parse(await readFile(policyFile, 'utf8'));

test('show with no file: every key at its default; --json has values, overridden and entries', async () => {
  const text = await runRelay(['policy', 'show'], { env });
  expect(text.code).toBe(0);
  expect(text.stdout).toContain('no file: every key at its default');
  for (const key of [
    'max-tip',
    'tip-percentile',
    'max-retries',
    'expiry-slots',
    'escalation-step',
    'max-queue',
    'rate-limit',
    'priority',
    'min-tip',
    'spend-limit',
  ]) {
    expect(text.stdout).toContain(key);
  }
  expect(text.stdout).not.toContain('overridden');

  const json = JSON.parse((await runRelay(['policy', 'show', '--json'], { env })).stdout);
  expect(json).toMatchObject({ path: policyFile, exists: false, ok: true, overridden: [] });
  expect(json.values['max-tip']).toBe(2_000_000);
});

test('set writes one validated key (plain integers, with separators too) and show marks it overridden', async () => {
  const set = await runRelay(['policy', 'set', 'max-tip', '3_000_000'], { env });
  expect(set.code).toBe(0);
  expect(set.stdout).toContain('max-tip = 3,000,000');
  expect(await readPolicy()).toEqual({ 'max-tip': 3_000_000 });
  expect(await runRelay(['policy', 'set', 'tip-percentile', 'P95'], { env })).toMatchObject({ code: 0 });
  expect(await readPolicy()).toEqual({ 'max-tip': 3_000_000, 'tip-percentile': 'p95' });
  // No temp file is left behind by the atomic write.
  expect(await readdir(dir)).toEqual(['relay.policy.json']);

  const show = await runRelay(['policy', 'show'], { env });
  expect(show.stdout).toMatch(/max-tip\s*│\s*3,000,000\s*│\s*2,000,000\s*│\s*lamports\s*│\s*overridden/);
  expect(show.stdout).toMatch(/max-retries\s*│\s*3\s*│\s*3\s*│\s*count\s*│\s*default/);
  const json = JSON.parse((await runRelay(['policy', 'show', '--json'], { env })).stdout);
  expect(json.overridden).toEqual(['max-tip', 'tip-percentile']);
});

test('set refuses a contradiction (exit 1, file unchanged) and a bad key or value (exit 2)', async () => {
  await runRelay(['policy', 'set', 'max-tip', '5000'], { env });
  const contradiction = await runRelay(['policy', 'set', 'min-tip', '9000'], { env });
  expect(contradiction.code).toBe(1);
  expect(contradiction.stderr).toContain('min-tip 9000 is above max-tip 5000');
  expect(await readPolicy()).toEqual({ 'max-tip': 5000 });

  const unknown = await runRelay(['policy', 'set', 'max_tips', '1'], { env });
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain('max_tips');
  const badValue = await runRelay(['policy', 'set', 'max-retries', 'lots'], { env });
  expect(badValue.code).toBe(2);
  expect(badValue.stderr).toContain('max-retries');
  expect(await readPolicy()).toEqual({ 'max-tip': 5000 });
});

test('validate: exit 0 on a good file, exit 1 listing every contradiction of a bad one', async () => {
  const none = await runRelay(['policy', 'validate'], { env });
  expect(none.code).toBe(0);
  await writeFile(
    policyFile,
    JSON.stringify({ 'min-tip': 9000, 'max-tip': 5000, 'spend-limit': 10, nope: 1 }),
  );
  const bad = await runRelay(['policy', 'validate'], { env });
  expect(bad.code).toBe(1);
  expect(bad.stdout).toContain('Unknown policy key "nope"');
  expect(bad.stdout).toContain('min-tip 9000 is above max-tip 5000');
  expect(bad.stdout).toContain('spend-limit 10 is below max-tip 5000');
  const json = await runRelay(['policy', 'validate', '--json'], { env });
  expect(json.code).toBe(1);
  expect(JSON.parse(json.stdout).problems.map((p: { code: string }) => p.code)).toEqual([
    'unknown_key',
    'min_tip_above_max_tip',
    'spend_limit_below_max_tip',
  ]);
  const show = await runRelay(['policy', 'show'], { env });
  expect(show.code).toBe(1);
});

test('reset <key> removes one key, reset removes all, clear deletes the file', async () => {
  await writeFile(policyFile, JSON.stringify({ 'max-tip': 3_000_000, 'max-retries': 5 }));
  expect((await runRelay(['policy', 'reset', 'max-tip'], { env })).code).toBe(0);
  expect(await readPolicy()).toEqual({ 'max-retries': 5 });
  expect((await runRelay(['policy', 'reset'], { env })).code).toBe(0);
  expect(await readPolicy()).toEqual({});
  expect((await runRelay(['policy', 'reset', 'bogus'], { env })).code).toBe(2);
  const clear = await runRelay(['policy', 'clear'], { env });
  expect(clear.code).toBe(0);
  expect(await readdir(dir)).toEqual([]);
});

test('export --path saves the resolved policy; import applies it, and refuses an invalid one untouched', async () => {
  await runRelay(['policy', 'set', 'max-retries', '7'], { env });
  const exported = join(dir, 'saved', 'policy.json');
  const exp = await runRelay(['policy', 'export', '--path', exported], { env });
  expect(exp.code).toBe(0);
  const saved = JSON.parse(await readFile(exported, 'utf8'));
  expect(saved).toMatchObject({ 'max-retries': 7, 'max-tip': 2_000_000, 'tip-percentile': 'p75' });
  expect(Object.keys(saved)).toHaveLength(10);
  expect((await runRelay(['policy', 'export'], { env })).code).toBe(2); // --path is required

  await runRelay(['policy', 'clear'], { env });
  const imp = await runRelay(['policy', 'import', exported], { env });
  expect(imp.code).toBe(0);
  expect((await readPolicy())['max-retries']).toBe(7);

  const invalid = join(dir, 'invalid.json');
  await writeFile(invalid, JSON.stringify({ 'max-retries': 99, 'min-tip': 1 }));
  const refused = await runRelay(['policy', 'import', invalid], { env });
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('max-retries');
  expect(refused.stderr).toContain('min-tip');
  expect((await readPolicy())['max-retries']).toBe(7);
});
