/**
 * Benchmark (not a test): bank throughput and JSON-RPC request rate.
 *
 * Bank: transfers signed with node:crypto Ed25519 (not web3.js) as wire bytes, submitted to the cluster (parse +
 * sigverify + blockhash + status-cache checks) and executed by LiteSVM when the next block is produced.
 * JSON-RPC: getSignatureStatuses batches of 256 signatures over loopback HTTP, several requests in flight.
 *
 * Run: `pnpm bench` in packages/simnet.
 */
import os from 'node:os';
import { SimCluster } from '../src/chain/cluster';
import { TestKeypair, createTransferTx, signatureOf } from '../src/chain/testing';
import { startRpcServer } from '../src/rpc/server';

const TRANSACTIONS = 20_000;
const PER_BLOCK = 1_000;
const PAYERS = 100;
const RPC_SECONDS = 3;
const RPC_CONCURRENCY = 8;
const BATCH = 256;

function rate(count: number, ms: number): number {
  return Math.round((count / ms) * 1000);
}

/** Submit and execute `wires` on `cluster`, PER_BLOCK per block; returns the time spent in each phase. */
function runBank(cluster: SimCluster, wires: Uint8Array[]): { submitMs: number; executeMs: number } {
  let submitMs = 0;
  let executeMs = 0;
  for (let offset = 0; offset < wires.length; offset += PER_BLOCK) {
    let start = performance.now();
    for (const wire of wires.slice(offset, offset + PER_BLOCK)) {
      const result = cluster.submitTransaction(wire);
      if (!result.ok) throw new Error(`submit failed: ${JSON.stringify(result.err)}`);
    }
    submitMs += performance.now() - start;
    start = performance.now();
    cluster.advance(1);
    executeMs += performance.now() - start;
  }
  const landed = wires.filter((wire) => cluster.signatureStatus(signatureOf(wire))?.err === null).length;
  if (landed !== wires.length) throw new Error(`only ${landed} of ${wires.length} landed`);
  return { submitMs, executeMs };
}

/** A seeded cluster with funded payers, advanced one slot; the same seed gives the same blockhash. */
function fundedCluster(payers: TestKeypair[], bankSigverify: boolean): SimCluster {
  const cluster = new SimCluster({ seed: 1, bankSigverify });
  for (const payer of payers) cluster.airdrop(payer.publicKey, 1_000_000_000_000);
  cluster.advance(1);
  return cluster;
}

async function main(): Promise<void> {
  const payers = Array.from({ length: PAYERS }, () => TestKeypair.generate());
  const cluster = fundedCluster(payers, true);
  const recipients = Array.from({ length: 50 }, () => TestKeypair.generate().publicKey);
  const blockhash = cluster.latestBlockhash('processed').blockhash;

  let start = performance.now();
  const wires: Uint8Array[] = [];
  for (let i = 0; i < TRANSACTIONS; i++) {
    wires.push(
      createTransferTx({
        from: payers[i % PAYERS] as TestKeypair,
        transfers: [{ to: recipients[i % recipients.length] as string, lamports: 1_000_000 + i }],
        recentBlockhash: blockhash,
      }),
    );
  }
  const signMs = performance.now() - start;

  const { submitMs, executeMs } = runBank(cluster, wires);
  const unverified = fundedCluster(payers, false);
  if (unverified.latestBlockhash('processed').blockhash !== blockhash)
    throw new Error('seeded blockhash differs');
  const withoutBankSigverify = runBank(unverified, wires);
  unverified.close();

  const server = await startRpcServer({ cluster });
  const signatures = wires.map(signatureOf);
  const body = (i: number): string =>
    JSON.stringify({
      jsonrpc: '2.0',
      id: String(i),
      method: 'getSignatureStatuses',
      params: [
        signatures.slice(
          (i * BATCH) % (TRANSACTIONS - BATCH),
          ((i * BATCH) % (TRANSACTIONS - BATCH)) + BATCH,
        ),
      ],
    });
  let requests = 0;
  const deadline = performance.now() + RPC_SECONDS * 1000;
  start = performance.now();
  await Promise.all(
    Array.from({ length: RPC_CONCURRENCY }, async () => {
      while (performance.now() < deadline) {
        const response = await fetch(server.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: body(requests++),
        });
        const json = (await response.json()) as { result?: { value: unknown[] } };
        if (json.result?.value.length !== BATCH) throw new Error('bad getSignatureStatuses answer');
      }
    }),
  );
  const rpcMs = performance.now() - start;
  await server.close();
  cluster.close();

  const rows: Array<[string, string]> = [
    ['machine', `${os.cpus().length} cores, Node ${process.versions.node}`],
    ['sign (node:crypto ed25519), tx/s', String(rate(TRANSACTIONS, signMs))],
    ['submit (parse + sigverify + checks), tx/s', String(rate(TRANSACTIONS, submitMs))],
    ['execute in blocks (LiteSVM), tx/s', String(rate(TRANSACTIONS, executeMs))],
    ['bank end to end (submit + execute), tx/s', String(rate(TRANSACTIONS, submitMs + executeMs))],
    ['execute, bankSigverify: false, tx/s', String(rate(TRANSACTIONS, withoutBankSigverify.executeMs))],
    [
      'end to end, bankSigverify: false, tx/s',
      String(rate(TRANSACTIONS, withoutBankSigverify.submitMs + withoutBankSigverify.executeMs)),
    ],
    [`getSignatureStatuses x${BATCH}, requests/s`, String(rate(requests, rpcMs))],
    ['getSignatureStatuses, signatures/s', String(rate(requests * BATCH, rpcMs))],
  ];
  const width = Math.max(...rows.map(([name]) => name.length));
  console.log(`| ${'measure'.padEnd(width)} | value |`);
  console.log(`| ${'-'.repeat(width)} | ----- |`);
  for (const [name, value] of rows) console.log(`| ${name.padEnd(width)} | ${value} |`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
