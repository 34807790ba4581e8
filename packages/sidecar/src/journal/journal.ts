import { constants } from 'node:fs';
import { open, readdir, readFile, rename, rm, mkdir, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * An append-only, fsynced operation log with crash-safe snapshot compaction.
 *
 * The journal owns the state it protects: an operation is applied to `state` only after the line that records
 * it is on disk, so whatever the process has acted on is exactly what a restart will replay. Appends made while
 * a write is in flight are grouped into one durable write (group commit): throughput scales with concurrency
 * instead of paying one fsync per request. On Linux the live file is opened `O_DSYNC`, so that write is durable when
 * it returns; elsewhere it is a write followed by fdatasync (see {@link durableAppend}).
 *
 * Files in `dir`:
 * - `journal-<gen>.jsonl`: one operation per line, the current generation last.
 * - `snapshot-<gen>.jsonl`: the state as operations, ending with an `{"end":N}` trailer; written to a temp
 *   name, fsynced, then renamed, so a snapshot that exists is complete. Snapshot G replaces every journal
 *   generation below G; recovery loads the newest snapshot, then replays journals G, G+1, ...
 */

export interface JournalCodec<TState, TOp> {
  initial(): TState;
  /** Apply one operation to the state (mutating it). Must be deterministic: replay calls it again. */
  apply(state: TState, op: TOp): void;
  /** Operations that rebuild `state` from `initial()`. */
  snapshot(state: TState): Iterable<TOp>;
}

export interface JournalOptions {
  /** Compact automatically once the live journal file passes this many bytes. Default 64 MiB; 0 disables. */
  compactAtBytes?: number;
  /** Skip fsync (benchmarks comparing durability costs only). Default false. */
  unsafeNoFsync?: boolean;
  /** Called at named points so crash tests can kill the process there. */
  crashPoint?: (name: CompactionCrashPoint) => void;
}

/**
 * Where a compaction can be interrupted, in order: the live file already switched to the next generation but no
 * snapshot written (`started`); the snapshot written under its temp name but not yet fsynced (`snapshot-written`);
 * fsynced and closed, not yet renamed (`before-rename`); renamed into place but the generations it replaces not yet
 * deleted (`renamed`).
 */
export type CompactionCrashPoint =
  'compaction.started' | 'compaction.snapshot-written' | 'compaction.before-rename' | 'compaction.renamed';

export interface JournalRecovery {
  snapshotGeneration: number | null;
  operationsReplayed: number;
  /** Problems that were survived (a torn last line), for the log. */
  warnings: string[];
}

interface Pending<TOp> {
  line: string;
  op: TOp;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class JournalClosedError extends Error {
  override readonly name = 'JournalClosedError';
}

export class JournalCorruptError extends Error {
  override readonly name = 'JournalCorruptError';
}

/**
 * How an append becomes durable. `O_DSYNC` only on Linux, where a write to a file opened with it completes as if
 * followed by fdatasync, the file's size included (open(2): "as though each write(2) was followed by a call to
 * fdatasync(2)"). Elsewhere the explicit fdatasync stays: on macOS libuv's fdatasync is F_FULLFSYNC, which O_DSYNC
 * does not give, and where the constant is missing or-ing in undefined would silently drop every sync.
 */
export function durableAppend(
  platform: NodeJS.Platform,
  unsafeNoFsync: boolean,
): 'o_dsync' | 'write+fdatasync' | 'none' {
  if (unsafeNoFsync) return 'none';
  return platform === 'linux' && typeof constants.O_DSYNC === 'number' ? 'o_dsync' : 'write+fdatasync';
}

/** open(2) flags of the live journal file for `mode`. */
export function appendFlags(mode: ReturnType<typeof durableAppend>): number {
  const base = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT;
  return mode === 'o_dsync' ? base | constants.O_DSYNC : base;
}

/** Characters of snapshot lines serialized into one chunk before it becomes bytes. */
const SNAPSHOT_CHUNK_CHARS = 1 << 20;
const EMPTY = Buffer.alloc(0);

const JOURNAL_RE = /^journal-(\d+)\.jsonl$/;
const SNAPSHOT_RE = /^snapshot-(\d+)\.jsonl$/;

export class Journal<TState, TOp> {
  readonly state: TState;
  private file!: FileHandle;
  private generation = 0;
  private fileBytes = 0;
  private queue: Pending<TOp>[] = [];
  private flushing: Promise<void> | null = null;
  private compacting: Promise<void> | null = null;
  private failure: unknown = null;
  private closed = false;
  private readonly stats = { commits: 0, batches: 0, compactions: 0, lastBatchMs: 0, maxBatch: 0 };
  /** How this journal makes an append durable, fixed at open (see {@link durableAppend}). */
  private readonly durability: ReturnType<typeof durableAppend>;

  private constructor(
    private readonly dir: string,
    private readonly codec: JournalCodec<TState, TOp>,
    private readonly options: Required<Omit<JournalOptions, 'crashPoint'>> &
      Pick<JournalOptions, 'crashPoint'>,
  ) {
    this.state = codec.initial();
    this.durability = durableAppend(process.platform, options.unsafeNoFsync);
  }

  /** Open (creating if needed) and recover the journal in `dir`. */
  static async open<TState, TOp>(
    dir: string,
    codec: JournalCodec<TState, TOp>,
    options: JournalOptions = {},
  ): Promise<{ journal: Journal<TState, TOp>; recovery: JournalRecovery }> {
    await mkdir(dir, { recursive: true });
    const journal = new Journal(dir, codec, {
      compactAtBytes: options.compactAtBytes ?? 64 * 1024 * 1024,
      unsafeNoFsync: options.unsafeNoFsync ?? false,
      crashPoint: options.crashPoint,
    });
    const recovery = await journal.recover();
    return { journal, recovery };
  }

  /** Whether the journal can take commits (false after a write failure or close). */
  get healthy(): boolean {
    return this.failure === null && !this.closed;
  }

  get metrics(): Readonly<typeof this.stats & { generation: number; fileBytes: number; queued: number }> {
    return {
      ...this.stats,
      generation: this.generation,
      fileBytes: this.fileBytes,
      queued: this.queue.length,
    };
  }

  /** Durably record `op`, then apply it to `state`. Resolves once both are done. */
  commit(op: TOp): Promise<void> {
    if (this.closed) return Promise.reject(new JournalClosedError('journal is closed'));
    if (this.failure) return Promise.reject(this.failure);
    const line = JSON.stringify(op) + '\n';
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ line, op, resolve, reject });
      this.scheduleFlush();
    });
  }

  /** Write a new snapshot of `state` and drop the journal generations it replaces. */
  compact(): Promise<void> {
    if (!this.compacting) {
      this.compacting = this.runCompaction().finally(() => {
        this.compacting = null;
      });
    }
    return this.compacting;
  }

  /** Flush what is queued and close the file. Further commits reject. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.drain();
    if (this.compacting) await this.compacting.catch(() => undefined);
    this.closed = true;
    await this.file.close();
  }

  /** Resolves when everything committed so far is on disk and applied. */
  async drain(): Promise<void> {
    while (this.flushing || this.queue.length > 0) {
      if (!this.flushing) this.scheduleFlush();
      await this.flushing?.catch(() => undefined);
    }
  }

  private scheduleFlush(): void {
    if (this.flushing) return;
    // Let every commit made in the current turn join this batch.
    this.flushing = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.flushBatches())
      .finally(() => {
        this.flushing = null;
        if (this.queue.length > 0 && !this.failure) this.scheduleFlush();
      });
  }

  private async flushBatches(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue;
      this.queue = [];
      const started = performance.now();
      try {
        const payload = Buffer.from(batch.map((p) => p.line).join(''));
        // On Linux the live file is opened O_DSYNC: the write returns once the bytes are as durable as a write
        // followed by fdatasync would make them, in one trip to libuv's pool instead of two (each trip back waits
        // its turn on the event loop, which is what a commit's latency is made of under load).
        await this.file.write(payload);
        if (this.durability === 'write+fdatasync') await this.file.datasync();
        this.fileBytes += payload.length;
      } catch (error) {
        // The file may now hold part of this batch; refuse further commits rather than guess.
        this.failure = error;
        for (const p of batch) p.reject(error);
        for (const p of this.queue) p.reject(error);
        this.queue = [];
        return;
      }
      for (const p of batch) {
        this.codec.apply(this.state, p.op);
        this.stats.commits++;
      }
      this.stats.batches++;
      this.stats.maxBatch = Math.max(this.stats.maxBatch, batch.length);
      this.stats.lastBatchMs = performance.now() - started;
      for (const p of batch) p.resolve();
      if (
        this.options.compactAtBytes > 0 &&
        this.fileBytes >= this.options.compactAtBytes &&
        !this.compacting
      ) {
        void this.compact().catch(() => undefined);
      }
    }
  }

  private async runCompaction(): Promise<void> {
    const next = this.generation + 1;
    const newFile = await open(join(this.dir, `journal-${next}.jsonl`), appendFlags(this.durability));
    // The new generation's name must survive a crash before any commit in it is acknowledged.
    await syncDirectory(this.dir);
    // Wait out in-flight writes; once none is running, the code below runs without yielding, so the captured
    // state is exactly "every operation in generations <= G" and later commits land in generation G+1.
    while (this.flushing) await this.flushing.catch(() => undefined);
    if (this.failure) {
      await newFile.close();
      throw this.failure;
    }
    // The state is captured here, in one synchronous pass, as chunks of bytes: a single string of every line (and
    // the joined copy, and the Buffer write() made of it) tripled the snapshot's size in memory for as long as it
    // was written: the sidecar's RSS peaks in the memory benchmark were compactions.
    const chunks: Buffer[] = [];
    let count = 0;
    let part: string[] = [];
    let partChars = 0;
    for (const op of this.codec.snapshot(this.state)) {
      const line = JSON.stringify(op);
      part.push(line);
      partChars += line.length + 1;
      count++;
      if (partChars >= SNAPSHOT_CHUNK_CHARS) {
        chunks.push(Buffer.from(part.join('\n') + '\n'));
        part = [];
        partChars = 0;
      }
    }
    part.push(JSON.stringify({ end: count }));
    chunks.push(Buffer.from(part.join('\n') + '\n'));
    const oldFile = this.file;
    this.file = newFile;
    this.generation = next;
    this.fileBytes = 0;
    await oldFile.close();
    this.options.crashPoint?.('compaction.started');

    const tmp = join(this.dir, `snapshot-${next}.jsonl.tmp`);
    const handle = await open(tmp, 'w');
    try {
      for (let i = 0; i < chunks.length; i++) {
        await handle.write(chunks[i] as Buffer);
        chunks[i] = EMPTY; // written: let it go now rather than after the whole file
      }
      this.options.crashPoint?.('compaction.snapshot-written');
      await handle.sync();
    } finally {
      await handle.close();
    }
    this.options.crashPoint?.('compaction.before-rename');
    await rename(tmp, join(this.dir, `snapshot-${next}.jsonl`));
    await syncDirectory(this.dir);
    this.options.crashPoint?.('compaction.renamed');
    this.stats.compactions++;
    // Older generations are now redundant.
    for (const name of await readdir(this.dir)) {
      const j = JOURNAL_RE.exec(name);
      const s = SNAPSHOT_RE.exec(name);
      if ((j && Number(j[1]) < next) || (s && Number(s[1]) < next))
        await rm(join(this.dir, name), { force: true });
    }
  }

  private async recover(): Promise<JournalRecovery> {
    const warnings: string[] = [];
    const names = await readdir(this.dir);
    for (const name of names) {
      if (name.endsWith('.tmp')) await rm(join(this.dir, name), { force: true }); // an interrupted snapshot
    }
    const snapshots = names
      .map((n) => SNAPSHOT_RE.exec(n))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => b - a);
    let snapshotGeneration: number | null = null;
    let replayed = 0;
    for (const gen of snapshots) {
      const ops = await readSnapshot(join(this.dir, `snapshot-${gen}.jsonl`));
      if (!ops) {
        warnings.push(`snapshot-${gen}.jsonl is incomplete; trying an older one`);
        continue;
      }
      for (const op of ops) this.codec.apply(this.state, op as TOp);
      replayed += ops.length;
      snapshotGeneration = gen;
      break;
    }
    const journals = names
      .map((n) => JOURNAL_RE.exec(n))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]))
      .filter((gen) => snapshotGeneration === null || gen >= snapshotGeneration)
      .sort((a, b) => a - b);
    let lastGen = snapshotGeneration ?? 0;
    for (const gen of journals) {
      const path = join(this.dir, `journal-${gen}.jsonl`);
      const { ops, validBytes, tornBytes } = await readJournal(path);
      for (const op of ops) this.codec.apply(this.state, op as TOp);
      replayed += ops.length;
      if (tornBytes > 0) {
        warnings.push(`journal-${gen}.jsonl: skipped a torn last line (${tornBytes} bytes) left by a crash`);
        // Cut the torn tail so the next append starts on a fresh line.
        const handle = await open(path, 'r+');
        await handle.truncate(validBytes);
        await handle.sync();
        await handle.close();
      }
      lastGen = gen;
    }
    this.generation = lastGen;
    const livePath = join(this.dir, `journal-${lastGen}.jsonl`);
    this.file = await open(livePath, appendFlags(this.durability));
    this.fileBytes = (await stat(livePath)).size;
    return { snapshotGeneration, operationsReplayed: replayed, warnings };
  }
}

async function readSnapshot(path: string): Promise<unknown[] | null> {
  const text = await readFile(path, 'utf8');
  const lines = text.split('\n').filter((l) => l.length > 0);
  const trailer = lines.pop();
  if (!trailer) return null;
  try {
    const end = JSON.parse(trailer) as { end?: number };
    if (end.end !== lines.length) return null;
    return lines.map((l) => JSON.parse(l) as unknown);
  } catch {
    return null;
  }
}

async function readJournal(path: string): Promise<{ ops: unknown[]; validBytes: number; tornBytes: number }> {
  const bytes = await readFile(path);
  const ops: unknown[] = [];
  let start = 0;
  let validBytes = 0;
  while (start < bytes.length) {
    const newline = bytes.indexOf(0x0a, start);
    if (newline === -1) break; // no terminating newline: the write was torn
    const line = bytes.subarray(start, newline).toString('utf8');
    try {
      if (line.length > 0) ops.push(JSON.parse(line));
    } catch {
      // A torn write can only be the tail: nothing after it was ever acknowledged. A bad line with complete
      // lines after it is corruption, and guessing would lose acknowledged work, so refuse to start.
      if (bytes.indexOf(0x0a, newline + 1) !== -1) {
        throw new JournalCorruptError(`${path}: unreadable line at byte ${start} followed by more records`);
      }
      break;
    }
    start = newline + 1;
    validBytes = start;
  }
  return { ops, validBytes, tornBytes: bytes.length - validBytes };
}

async function syncDirectory(dir: string): Promise<void> {
  // Make the rename itself durable. Some platforms refuse to fsync a directory; that is not fatal there.
  try {
    const handle = await open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    /* best effort */
  }
}
