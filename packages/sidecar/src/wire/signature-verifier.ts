import { Worker } from 'node:worker_threads';
import { firstInvalidSignature, type ParsedTransaction } from './transaction';

export type SignatureProblem = { index: number; reason: 'missing' | 'invalid' } | null;

/**
 * Ed25519 checks of every required signature of an enqueued transaction, off the event loop.
 *
 * One verify costs ~115 µs on the 2-core benchmark machine: at a few thousand enqueues per second that was 40% of
 * the sidecar's only JS thread, so the checks run in worker threads (node:crypto there too), batched per
 * event-loop turn to keep message overhead per transaction in the microseconds. With `threads: 0`, or while no
 * worker is alive, checks run inline, with the same answers.
 */
export class SignatureVerifier {
  private readonly workers: WorkerSlot[] = [];
  private next = 0;
  private closed = false;

  constructor(private readonly threads: number) {
    for (let i = 0; i < threads; i++) this.workers.push(new WorkerSlot());
  }

  /** The first required signature that is all zeros (`missing`) or does not verify (`invalid`), or null. */
  verify(tx: ParsedTransaction): Promise<SignatureProblem> {
    const live = this.workers.filter((w) => w.usable);
    if (this.closed || live.length === 0) return Promise.resolve(firstInvalidSignature(tx));
    const slot = live[this.next++ % live.length] as WorkerSlot;
    return slot.verify(tx).catch(() => firstInvalidSignature(tx));
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.workers.map((w) => w.close()));
  }

  get size(): number {
    return this.threads;
  }
}

/** A job's fixed header in a batch: id, signer count, message length (u32 each, little-endian). */
const JOB_HEADER_BYTES = 12;

interface Job {
  id: number;
  tx: ParsedTransaction;
}

/**
 * A batch as one buffer, transferred to the worker rather than cloned: per job its header, then the signers' keys
 * (32 bytes each, straight from the wire), their signatures (64 each) and the message. Cloning an array of job
 * objects with three typed arrays each cost the sidecar's thread more than the checks' own bookkeeping (postMessage
 * was 5-6 % of it under enqueue load).
 */
function packBatch(batch: readonly Job[]): ArrayBuffer {
  let size = 0;
  for (const { tx } of batch) size += JOB_HEADER_BYTES + 96 * tx.numRequiredSignatures + tx.message.length;
  const buffer = new ArrayBuffer(size);
  const view = new DataView(buffer);
  const bytes = new Uint8Array(buffer);
  let at = 0;
  for (const { id, tx } of batch) {
    const n = tx.numRequiredSignatures;
    view.setUint32(at, id, true);
    view.setUint32(at + 4, n, true);
    view.setUint32(at + 8, tx.message.length, true);
    at += JOB_HEADER_BYTES;
    bytes.set(tx.wire.subarray(tx.accountKeysOffset, tx.accountKeysOffset + 32 * n), at);
    at += 32 * n;
    for (let i = 0; i < n; i++) bytes.set(tx.signatureBytes[i] as Uint8Array, at + 64 * i);
    at += 64 * n;
    bytes.set(tx.message, at);
    at += tx.message.length;
  }
  return buffer;
}

class WorkerSlot {
  private worker: Worker | null = null;
  private readonly pending = new Map<
    number,
    { resolve: (p: SignatureProblem) => void; reject: (e: Error) => void }
  >();
  private batch: Job[] = [];
  /**
   * A batch is with the worker: what arrives meanwhile waits for its answer and goes as the next batch. One message
   * per checked transaction (each `postMessage` wakes the worker: ~25 µs of this thread on the VM, 7.8 % of it under
   * enqueue load, where the turns held one or two transactions each) becomes one per worker round trip: batches
   * grow with the load, and an idle worker still gets a lone check at once.
   */
  private busy = false;
  private sendScheduled = false;
  private nextId = 0;
  private restarts = 0;
  usable = true;

  constructor() {
    this.start();
  }

  verify(tx: ParsedTransaction): Promise<SignatureProblem> {
    const id = this.nextId++;
    return new Promise<SignatureProblem>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.batch.push({ id, tx });
      this.scheduleSend();
    });
  }

  async close(): Promise<void> {
    this.usable = false;
    const worker = this.worker;
    this.worker = null;
    this.failPending(new Error('verifier closed'));
    await worker?.terminate();
  }

  /** Send at the end of this turn (the turn's checks together), unless a batch is out: its answer sends then. */
  private scheduleSend(): void {
    if (this.busy || this.sendScheduled || this.batch.length === 0) return;
    this.sendScheduled = true;
    setImmediate(() => {
      this.sendScheduled = false;
      this.send();
    });
  }

  private send(): void {
    if (this.busy || this.batch.length === 0) return;
    const batch = this.batch;
    this.batch = [];
    if (!this.worker) {
      for (const job of batch) this.settle(job.id, new Error('no worker'));
      return;
    }
    const packed = packBatch(batch);
    this.busy = true;
    this.worker.postMessage(packed, [packed]);
  }

  private start(): void {
    const worker = new Worker(WORKER_SOURCE, { eval: true });
    worker.unref();
    worker.on('message', (results: [number, number, number][]) => {
      for (const [id, index, reason] of results) {
        const entry = this.pending.get(id);
        if (!entry) continue;
        this.pending.delete(id);
        entry.resolve(index < 0 ? null : { index, reason: reason === 0 ? 'missing' : 'invalid' });
      }
      // What waited for this answer goes now, as one batch.
      this.busy = false;
      this.send();
    });
    const fail = (error: Error) => {
      if (this.worker !== worker) return;
      this.worker = null;
      this.busy = false;
      this.failPending(error); // callers fall back to an inline check
      // A worker that keeps dying is given up on: inline checks from then on.
      if (this.usable && ++this.restarts <= 3) this.start();
      else this.usable = false;
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`signature worker exited with code ${code}`)));
    this.worker = worker;
  }

  private settle(id: number, error: Error): void {
    const entry = this.pending.get(id);
    if (!entry) return;
    this.pending.delete(id);
    entry.reject(error);
  }

  private failPending(error: Error): void {
    const entries = [...this.pending.values()];
    this.pending.clear();
    this.batch = [];
    for (const entry of entries) entry.reject(error);
  }
}

/**
 * The worker: [id, index, reason] per job, index -1 when every signature verifies; reason 0 = missing (all zero
 * bytes), 1 = invalid. Plain CommonJS evaluated from a string, so the ESM and CJS builds need no extra file.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createPublicKey, verify } = require('node:crypto');
const PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const keys = new Map();
function keyFor(raw) {
  const id = Buffer.from(raw).toString('hex');
  let key = keys.get(id);
  if (!key) {
    key = createPublicKey({ key: Buffer.concat([PREFIX, raw]), format: 'der', type: 'spki' });
    if (keys.size >= 4096) keys.clear();
    keys.set(id, key);
  }
  return key;
}
parentPort.on('message', (buffer) => {
  const view = new DataView(buffer);
  const bytes = new Uint8Array(buffer);
  const out = [];
  let at = 0;
  while (at < bytes.length) {
    const id = view.getUint32(at, true);
    const n = view.getUint32(at + 4, true);
    const messageLength = view.getUint32(at + 8, true);
    const keysAt = at + 12;
    const signaturesAt = keysAt + 32 * n;
    const message = bytes.subarray(signaturesAt + 64 * n, signaturesAt + 64 * n + messageLength);
    at = signaturesAt + 64 * n + messageLength;
    let result = [id, -1, 0];
    for (let i = 0; i < n; i++) {
      const signature = bytes.subarray(signaturesAt + 64 * i, signaturesAt + 64 * i + 64);
      if (signature.every((b) => b === 0)) { result = [id, i, 0]; break; }
      let ok = false;
      try { ok = verify(null, message, keyFor(bytes.subarray(keysAt + 32 * i, keysAt + 32 * i + 32)), signature); } catch {}
      if (!ok) { result = [id, i, 1]; break; }
    }
    out.push(result);
  }
  parentPort.postMessage(out);
});
`;
