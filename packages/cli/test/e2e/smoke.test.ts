import { baseEnv, runRelay } from '../helpers/relay-bin';

test('relay smoke --sim reaches finalized: progress (slot, leader, stage) on stderr, one JSON document on stdout', async () => {
  const run = await runRelay(['smoke', '--sim', '--slot-ms', '100', '--json'], {
    env: baseEnv(),
    timeoutMs: 60_000,
  });
  expect(run.code).toBe(0);
  const result = JSON.parse(run.stdout);
  expect(result).toMatchObject({ stage: 'finalized' });
  expect(result.bundle_id).toMatch(/^[0-9a-f]{64}$/);
  expect(result.signatures).toHaveLength(2);
  expect(result.slot_landed).toBeGreaterThanOrEqual(result.slot_submitted);
  expect(run.stderr).toMatch(/slot \d+ {2}leader \w+ {2}stage submitted {2}bundle [0-9a-f]{64}/);
  for (const stage of ['landed', 'processed', 'confirmed', 'finalized'])
    expect(run.stderr).toMatch(new RegExp(`stage ${stage}`));
}, 70_000);

test('relay smoke without upstreams or --sim exits 1 with the hint', async () => {
  const run = await runRelay(['smoke'], { env: baseEnv() });
  expect(run.code).toBe(1);
  expect(run.stderr).toContain('RELAY_E_CONFIG_MISSING_ENV');
  expect(run.stderr).toContain('--sim');
});
