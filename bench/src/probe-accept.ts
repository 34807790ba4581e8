import { startPostgres } from '@solrelay/testkit';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
const { PgTxStore } = createRequire(import.meta.url)('../../packages/sidecar/dist/index.cjs');
import { tx } from '../../packages/sidecar/test/helpers/store-records';
import { CLI_BIN } from './lib/processes';

const server = await startPostgres({ settings: { synchronous_commit: 'on', fsync: 'on', full_page_writes: 'on' } });
await server.createTemplate('tpl', async (url) => { execFileSync('node', [CLI_BIN, 'db', 'migrate'], { env: { ...process.env, RELAY_DATABASE_URL: url } }); });
for (const round of [1, 2, 3]) {
  const url = await server.createDatabase('tpl');
  const store = await PgTxStore.open(url, { maintenanceMs: 0 });
  if (round > 1) await Promise.all(Array.from({ length: 10 }, (_, i) => store.accept(tx(`w_${round}_${i}`, `wsig_${round}_${i}`))));
  const t0 = performance.now();
  const times: number[] = [];
  await Promise.all(Array.from({ length: 100 }, async (_, i) => {
    const s = performance.now();
    await store.accept(tx(`tx_${round}_${i}`, `sig_${round}_${i}`), [{ kind: 'tx_enqueued', data: { tx_id: `tx_${i}` } } as never]);
    times.push(performance.now() - s);
  }));
  times.sort((a, b) => a - b);
  console.log(`round ${round}: total ${(performance.now() - t0).toFixed(1)} ms, p50 ${times[50]!.toFixed(1)}, max ${times[99]!.toFixed(1)}`);
  // sequential
  const t1 = performance.now();
  for (let i = 0; i < 50; i++) await store.accept(tx(`txs_${round}_${i}`, `sigs_${round}_${i}`));
  console.log(`  sequential 50: ${((performance.now() - t1) / 50).toFixed(2)} ms each`);
  await store.close();
}
await server.stop();
