import { mkdtemp, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_POLICY, parsePolicyText, type Policy, type PolicyProblem } from '@solrelay/core';
import { PolicyStore, type Sidecar } from '@solrelay/sidecar';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import { looksLikeACrash, runCliInProcess } from '../../src/fuzz-cli';
import { generatePolicyFiles, type PolicyFileCase } from '../../src/fuzz-policy-files';
import { bump, fuzzSeed, recordFuzzFigures } from '../../src/fuzz-results';
import { startFuzzStack } from '../../src/fuzz-stack';

/**
 * Bad input, policy file (issue #10): more than a thousand malformed relay.policy.json files — broken JSON, wrong
 * types, out-of-range, huge and fractional numbers, unknown keys, contradictions, unicode, binary, empty, oversize —
 * through every path that reads one: the sidecar's PolicyStore (load and reload), the `relay policy` commands
 * (validate, show, set, import) in process, and a running sidecar following its file. Each is refused whole with
 * coded problems naming the key at fault, nothing crashes, and the previous valid policy stays in force. There is
 * no HTTP route that writes the policy (PUT/POST /policy are unknown routes; fuzz-routes sends them).
 */

const FILES = Number(process.env.RELAY_FUZZ_POLICY_FILES ?? 1_200);
const LIVE_FILES = 120;
const PROBLEM_CODES = new Set([
  'invalid_json',
  'not_an_object',
  'unknown_key',
  'invalid_value',
  'min_tip_above_max_tip',
  'spend_limit_below_max_tip',
  'escalation_step_zero_with_retries',
  'expiry_beyond_blockhash_lifetime',
]);

const seed = fuzzSeed();
const files = generatePolicyFiles(seed, FILES);
const figures: Record<string, unknown> = { seed };
const categories: Record<string, number> = {};
for (const file of files) bump(categories, file.category);

const INITIAL = { 'max-tip': 3_000_000, 'min-tip': 5_000, 'max-retries': 5 };

/** Writes `bytes` the way the CLI does (temp file, rename), sized unlike the file it replaces so a reload sees it. */
async function replaceFile(path: string, bytes: Buffer): Promise<Buffer> {
  let out = bytes;
  const before = await stat(path).catch(() => null);
  while (before && before.size === out.length) out = Buffer.concat([out, Buffer.from('\n')]);
  const temp = `${path}.fuzz.tmp`;
  await writeFile(temp, out);
  await rename(temp, path);
  return out;
}

/** Problems every refusal must carry: at least one error, known codes, a message each, the expected problem. */
function checkProblems(file: PolicyFileCase, problems: PolicyProblem[]): string | null {
  if (!problems.some((p) => p.severity === 'error')) return 'no error-level problem';
  for (const p of problems) {
    if (!PROBLEM_CODES.has(p.code)) return `unknown problem code ${String(p.code)}`;
    if (typeof p.message !== 'string' || p.message.length === 0) return `${p.code} without a message`;
    if (p.key !== null && typeof p.key !== 'string') return `${p.code} with a key of type ${typeof p.key}`;
    if (p.code === 'invalid_value' && (p.key === null || !p.message.startsWith(`${p.key}:`)))
      return `invalid_value not naming its key: ${p.message}`;
  }
  const want = file.expect;
  if (want && !problems.some((p) => p.code === want.code && (want.key === undefined || p.key === want.key))) {
    return `expected ${want.code}${want.key === undefined ? '' : ` on ${JSON.stringify(want.key)}`}, got ${JSON.stringify(problems).slice(0, 300)}`;
  }
  return null;
}

test('≥ 1,000 malformed policy files through the PolicyStore: refused with coded problems, the last valid policy stays', async () => {
  console.log(`fuzz-policy: seed ${seed} (replay with RELAY_FUZZ_SEED=${seed}), ${files.length} files`);
  const started = performance.now();
  const dir = await mkdtemp(join(tmpdir(), 'relay-fuzz-policy-'));
  const path = join(dir, 'relay.policy.json');
  await writeFile(path, JSON.stringify(INITIAL));
  const changes: Array<{ ok: boolean }> = [];
  const store = new PolicyStore(path, (change) => changes.push({ ok: change.ok }));
  await store.start({ watch: false });
  let lastValid: Policy = { ...DEFAULT_POLICY, ...INITIAL };
  expect(store.current).toEqual(lastValid);

  const failures: string[] = [];
  let refused = 0;
  let applied = 0;
  for (const [index, file] of files.entries()) {
    const bytes = await replaceFile(path, file.bytes);
    const before = changes.length;
    await store.reload();
    const verdict = parsePolicyText(bytes.toString('utf8'));
    const where = `#${index} ${file.category} ${JSON.stringify(bytes.toString('utf8').slice(0, 120))}`;
    if (changes.length !== before + 1)
      failures.push(`${where}: ${changes.length - before} change notifications`);
    if (verdict.ok) {
      if (file.expect) failures.push(`${where}: expected ${file.expect.code} but core found the file valid`);
      lastValid = verdict.policy as Policy;
      applied++;
      if (JSON.stringify(store.current) !== JSON.stringify(lastValid))
        failures.push(`${where}: a valid file was not applied`);
      continue;
    }
    refused++;
    if (changes[changes.length - 1]?.ok !== false) failures.push(`${where}: not reported as refused`);
    if (JSON.stringify(store.current) !== JSON.stringify(lastValid))
      failures.push(`${where}: the policy in force changed`);
    const view = store.view();
    if (JSON.stringify(view.values) !== JSON.stringify(lastValid))
      failures.push(`${where}: /policy values changed`);
    const problem = checkProblems(file, view.problems);
    if (problem) failures.push(`${where}: ${problem}`);
    if (failures.length > 30) break;
  }
  store.stop();
  Object.assign(figures, {
    store_files: files.length,
    store_refused: refused,
    store_valid_applied: applied,
    categories,
    store_ms: Math.round(performance.now() - started),
  });
  expect(failures).toEqual([]);
  expect(refused).toBeGreaterThanOrEqual(1_000);
}, 120_000);

test('the `relay policy` commands refuse every malformed file with exit 1 and the problems, and change nothing', async () => {
  const started = performance.now();
  const dir = await mkdtemp(join(tmpdir(), 'relay-fuzz-policy-cli-'));
  const target = join(dir, 'relay.policy.json');
  const candidate = join(dir, 'candidate.json');
  const env = { RELAY_POLICY_FILE: target, NO_COLOR: '1' };
  const good = `${JSON.stringify(INITIAL, null, 2)}\n`;
  const failures: string[] = [];
  const exits: Record<string, number> = {};
  let runs = 0;
  for (const [index, file] of files.entries()) {
    const verdict = parsePolicyText(file.bytes.toString('utf8'));
    // Every second malformed file goes through the CLI (the store above took every one).
    if (verdict.ok || index % 2 === 1) continue;
    const where = `#${index} ${file.category} ${JSON.stringify(file.bytes.toString('utf8').slice(0, 100))}`;
    // The file as the one in force: validate, then show / set (every sixteenth).
    await writeFile(target, file.bytes);
    const validate = await runCliInProcess(['policy', 'validate', '--json'], env, dir);
    runs++;
    bump(exits, `validate ${validate.code}`);
    const doc = JSON.parse(validate.stdout) as { ok: boolean; problems: PolicyProblem[] };
    if (validate.code !== 1 || doc.ok !== false) failures.push(`${where}: validate exit ${validate.code}`);
    const problem = checkProblems(file, doc.problems);
    if (problem) failures.push(`${where}: validate: ${problem}`);
    const crash = looksLikeACrash(validate);
    if (crash) failures.push(`${where}: validate: ${crash}`);
    if (index % 16 === 0) {
      const show = await runCliInProcess(['policy', 'show'], env, dir);
      const set = await runCliInProcess(['policy', 'set', 'max-tip', '4000000'], env, dir);
      runs += 2;
      bump(exits, `show ${show.code}`);
      bump(exits, `set ${set.code}`);
      if (show.code !== 1 || !show.stdout.includes('is invalid'))
        failures.push(`${where}: show exit ${show.code}`);
      if (set.code !== 1 || !set.stderr.includes('is invalid; cannot set a key'))
        failures.push(`${where}: set on an invalid file exit ${set.code}: ${set.stderr.slice(0, 200)}`);
      if (!(await readFile(target)).equals(file.bytes))
        failures.push(`${where}: set changed an invalid file`);
      for (const run of [show, set]) {
        const c = looksLikeACrash(run);
        if (c) failures.push(`${where}: ${c}`);
      }
    }
    // The file as one to import over a good policy (every eighth): refused, the good policy untouched.
    if (index % 8 === 0) {
      await writeFile(target, good);
      await writeFile(candidate, file.bytes);
      const imported = await runCliInProcess(['policy', 'import', candidate, '--json'], env, dir);
      runs++;
      bump(exits, `import ${imported.code}`);
      const body = JSON.parse(imported.stdout) as {
        error?: { exit_code: number; message: string; details: string[] };
      };
      if (
        imported.code !== 1 ||
        body.error?.exit_code !== 1 ||
        !/nothing was changed/.test(body.error.message)
      )
        failures.push(`${where}: import exit ${imported.code}: ${imported.stdout.slice(0, 200)}`);
      if ((body.error?.details.length ?? 0) === 0) failures.push(`${where}: import listed no problems`);
      if ((await readFile(target, 'utf8')) !== good)
        failures.push(`${where}: import changed the policy in force`);
      const c = looksLikeACrash(imported);
      if (c) failures.push(`${where}: import: ${c}`);
    }
    if (failures.length > 30) break;
  }
  Object.assign(figures, {
    cli_runs: runs,
    cli_exit_codes: exits,
    cli_ms: Math.round(performance.now() - started),
  });
  expect(failures).toEqual([]);
}, 120_000);

describe('a running sidecar following its policy file', () => {
  let stack: Stack<Sidecar>;

  beforeAll(async () => {
    stack = await startFuzzStack({ policy: INITIAL, env: { RELAY_AGENT_GRACE_S: '0' } });
  }, 60_000);

  afterAll(async () => {
    await stack?.close();
  });

  test('keeps the last valid policy in force through malformed files and enforces it', async () => {
    const started = performance.now();
    const path = stack.env.RELAY_POLICY_FILE as string;
    const url = stack.sidecar.url;
    const inForce = { ...DEFAULT_POLICY, ...INITIAL };
    expect((await get(url, '/policy')).body.values).toEqual(inForce);
    const live = files.filter((f) => !parsePolicyText(f.bytes.toString('utf8')).ok).slice(0, LIVE_FILES);
    let watched = 0;
    for (const [index, file] of live.entries()) {
      const bytes = await replaceFile(path, file.bytes);
      const expected = parsePolicyText(bytes.toString('utf8')).problems;
      // Most reloads are asked for directly; every fifth file is left to the directory watch (and 1 s poll).
      if (index % 5 === 0) watched++;
      else await stack.sidecar.policy.reload();
      await waitUntil(
        async () => {
          const view = (await get(url, '/policy')).body;
          return JSON.stringify(view.problems) === JSON.stringify(expected) ? view : null;
        },
        10_000,
        `the sidecar reporting the problems of file #${index} (${file.category})`,
      ).then((view) => expect(view.values).toEqual(inForce));
    }
    // Still up, still answering, and still enforcing the policy from before the bad files: min-tip 5,000 and
    // max-tip 3,000,000, not the defaults (1,000 and 2,000,000).
    expect((await get(url, '/healthz')).body).toEqual({ ok: true });
    expect((await get(url, '/status')).status).toBe(200);
    const belowMin = await post(url, '/tx/enqueue', { transaction: stack.transfer(11), max_tip: 4_000 });
    expect(belowMin.status).toBe(422);
    expect(belowMin.body.error).toMatchObject({
      code: 'RELAY_E_POLICY_CALLER_MAX_TIP_BELOW_MIN_TIP',
      details: { limit: 5_000 },
    });
    const accepted = await post(url, '/tx/enqueue', { transaction: stack.transfer(12) });
    expect(accepted.status).toBe(202);
    const tooHigh = await post(url, '/internal/submit', {
      tx_id: accepted.body.tx_id,
      tip_lamports: 3_000_001,
      reason: 'fuzz',
    });
    expect(tooHigh.body.error).toMatchObject({
      code: 'RELAY_E_POLICY_MAX_TIP_EXCEEDED',
      details: { limit: 3_000_000 },
    });
    const within = await post(url, '/internal/submit', {
      tx_id: accepted.body.tx_id,
      tip_lamports: 2_500_000,
      reason: 'fuzz',
    });
    expect(within.status).toBe(202);
    // And a valid file is still picked up after all that.
    await replaceFile(path, Buffer.from(JSON.stringify({ 'max-tip': 4_000_000 })));
    await waitUntil(
      async () => (await get(url, '/policy')).body.values['max-tip'] === 4_000_000,
      10_000,
      'a valid file applied',
    );
    Object.assign(figures, {
      live_files: live.length,
      live_files_left_to_the_watcher: watched,
      live_ms: Math.round(performance.now() - started),
    });
  }, 120_000);
});

afterAll(() => {
  const total = (figures.store_files as number | undefined) ?? 0;
  recordFuzzFigures('policy', { ...figures, policy_files_fuzzed: total });
  console.log(`fuzz-policy figures: ${JSON.stringify(figures)}`);
});
