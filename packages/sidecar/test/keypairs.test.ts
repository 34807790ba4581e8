import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Keypair } from '@solana/web3.js';
import { isRelayError } from '@solrelay/core';
import { configFromEnv } from '../src/config';
import { startSidecar } from '../src/service';
import { quietLogger } from './helpers/relay-stack';

/**
 * The tipper pool at start-up: every file `KEYPAIR_PATH` lists is read before anything else starts, and the first
 * one that is missing, unreadable or not a keypair stops start-up with RELAY_E_CONFIG_UNREADABLE_KEYPAIR naming
 * that file (so does a keypair listed under two names). No network is touched: start-up fails before it would be.
 */
let dir: string;
let good: string[];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'relay-keypairs-'));
  good = [];
  for (const name of ['a.json', 'b.json']) {
    const path = join(dir, name);
    await writeFile(path, JSON.stringify([...Keypair.generate().secretKey]), { mode: 0o600 });
    good.push(path);
  }
  await writeFile(join(dir, 'not-json.json'), 'not json', { mode: 0o600 });
  await writeFile(join(dir, 'short.json'), JSON.stringify([1, 2, 3]), { mode: 0o600 });
  await mkdir(join(dir, 'a-directory'));
});

async function startWith(keypairPath: string): Promise<{ code: string; path: unknown; message: string }> {
  const env = {
    STREAM_ENDPOINT: 'http://127.0.0.1:1',
    RPC_URL: 'http://127.0.0.1:1',
    KEYPAIR_PATH: keypairPath,
    RELAY_DATA_DIR: join(dir, 'data'),
  };
  try {
    const sidecar = await startSidecar(configFromEnv(env, dir), { logger: quietLogger });
    await sidecar.close();
  } catch (error) {
    if (isRelayError(error)) return { code: error.code, path: error.details.path, message: error.message };
    throw error;
  }
  throw new Error('expected start-up to fail');
}

test.each([
  ['missing', 'missing.json', /ENOENT/],
  ['not JSON', 'not-json.json', /not JSON/],
  ['not 64 bytes', 'short.json', /64 numbers/],
  ['not a file', 'a-directory', /EISDIR/],
])('a %s file among the pool stops start-up naming it', async (_what, bad, reason) => {
  const failed = await startWith(`${good[0]},${bad},${good[1]}`);
  expect(failed.code).toBe('RELAY_E_CONFIG_UNREADABLE_KEYPAIR');
  expect(failed.path).toBe(join(dir, bad));
  expect(failed.message).toContain(join(dir, bad));
  expect(failed.message).toMatch(reason);
});

test('the same keypair under two names is refused, naming the second', async () => {
  const same = join(dir, 'same-as-a.json');
  await writeFile(same, await readFile(good[0] as string), { mode: 0o600 });
  const failed = await startWith(`${good[0]},${same}`);
  expect(failed.code).toBe('RELAY_E_CONFIG_UNREADABLE_KEYPAIR');
  expect(failed.path).toBe(same);
  expect(failed.message).toMatch(/same keypair .* as .*a\.json/);
});
