import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { get, post, waitUntil, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/**
 * The lifecycle log is written after the journal: a crash between the two (or in the middle of the write, whose torn
 * line start-up cuts) leaves the log behind the journal. Start-up writes the lost entries again.
 */
let stack: Stack<Sidecar>;

beforeAll(async () => {
  stack = await startRelayStack({ env: { BYPASS_AGENT: '1', BYPASS_TIP_LAMPORTS: '50000' } });
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

test('entries a crash lost are written again at start-up, and a clean restart writes nothing', async () => {
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const answer = await post(stack.sidecar.url, '/tx/enqueue', { transaction: stack.transfer() });
    expect(answer.status).toBe(202);
    ids.push(answer.body.tx_id);
  }
  await waitUntil(
    async () => {
      const states = await Promise.all(
        ids.map(async (id) => (await get(stack.sidecar.url, `/tx/${id}`)).body.state),
      );
      return states.every((s) => s === 'finalized');
    },
    30_000,
    'finalized',
  );
  const path = join(stack.dir, 'lifecycle.jsonl');
  const bundleOf = async (id: string): Promise<string> =>
    (await get(stack.sidecar.url, `/tx/${id}`)).body.bundle_id;
  const bundles = await Promise.all(ids.map(bundleOf));
  await stack.sidecar.close();

  // As a crash leaves it: the first transaction's last two entries (confirmed, finalized) never reached the file,
  // the second's bundle is missing altogether, and half a line is left at the end.
  const lines = (await readFile(path, 'utf8')).trim().split('\n');
  const kept: string[] = [];
  let dropped = 0;
  for (let i = lines.length - 1; i >= 0; i--) {
    const entry = JSON.parse(lines[i] as string) as { bundle_id: string; stage: string };
    if (entry.bundle_id === bundles[1] || (entry.bundle_id === bundles[0] && dropped < 2 && ++dropped))
      continue;
    kept.unshift(lines[i] as string);
  }
  await writeFile(path, kept.join('\n') + '\n' + (lines[0] as string).slice(0, 40));
  const linesBefore = kept.length;

  await stack.restart();
  for (const bundle of bundles) {
    const entry = await get(stack.sidecar.url, `/bundle/${bundle}`);
    expect(entry.status).toBe(200);
    expect(entry.body.stage).toBe('finalized');
  }
  await stack.sidecar.close();
  const after = (await readFile(path, 'utf8')).trim().split('\n');
  // Two entries written again (the first's and the second's finalized entries); the third was intact.
  expect(after).toHaveLength(linesBefore + 2);
  expect(after.slice(-2).map((l) => JSON.parse(l).stage)).toEqual(['finalized', 'finalized']);

  // Nothing lost this time: a restart writes nothing.
  await stack.restart();
  await stack.sidecar.close();
  expect((await readFile(path, 'utf8')).trim().split('\n')).toHaveLength(after.length);
  await stack.restart();
}, 60_000);
