// Every jest file starts with fast-check seeded as testSeed() in @solrelay/testkit decides (fixed unless
// RELAY_TEST_SEED says otherwise), so property tests in CI cannot fail by chance; fast-check prints the seed and
// the shrunk counterexample of a failure, and RELAY_TEST_SEED=<that seed> replays it.
const raw = (process.env.RELAY_TEST_SEED ?? '').trim();
const FIXED_TEST_SEED = 20261125; // the same value as testkit's FIXED_TEST_SEED
let seed = FIXED_TEST_SEED;
if (raw === 'random') seed = Math.floor(Math.random() * 2 ** 31);
else if (/^\d+$/.test(raw)) seed = Number(raw);
else if (raw !== '')
  throw new Error(`RELAY_TEST_SEED must be a whole number or "random", got ${JSON.stringify(raw)}`);
let fc = null;
try {
  fc = require('fast-check');
} catch {
  // a package without fast-check has no property tests to seed
}
if (fc) fc.configureGlobal({ ...fc.readConfigureGlobal(), seed });
