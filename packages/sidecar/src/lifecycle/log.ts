import { createReadStream } from 'node:fs';
import { open, stat, mkdir, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createInterface } from 'node:readline';

/**
 * The append-only bundle audit log (`LIFECYCLE_PATH`, JSON lines). Each line is a whole entry, written at every
 * stage change; the latest line of a bundle id is its entry. Memory stays bounded: an index of the most recently
 * written entries (default 10,000 bundles), rebuilt at start-up from the file's tail only, so start-up time does not
 * grow with the file; older bundles are found by scanning the file on demand.
 */

/** What the API reads of a lifecycle log: this file (the journal store) or the fleet's table (PostgreSQL). */
export interface LifecycleReader<TEntry> {
  /** The latest entries of the `n` most recently submitted bundles, most recent last. */
  recent(n: number): TEntry[] | Promise<TEntry[]>;
  /** The latest entry of a bundle. */
  find(bundleId: string): Promise<TEntry | undefined>;
}

export interface LifecycleLogOptions {
  /** Bundles kept in the in-memory index. Default 10,000. */
  indexSize?: number;
  /** Bytes read from the end of the file at start-up to rebuild the index. Default 32 MiB. */
  tailBytes?: number;
  /** Called at named points so crash tests can kill the process there. */
  crashPoint?: LifecycleCrashHook;
}

/**
 * A crash test's hook. `armed(name)` says whether the hook kills at `name`: only then does a flush take the slower
 * path of two writes with the crash point between them (without `armed`, every call of the hook counts as armed).
 */
export interface LifecycleCrashHook {
  (name: 'lifecycle.mid-write'): void;
  armed?: (name: string) => boolean;
}

/**
 * Where a flush of `lines` is cut for the `lifecycle.mid-write` crash point: inside the last line, past its first
 * byte and before its newline, so a crash there always leaves a torn tail of at least one byte (half of a line, not
 * half of the batch: with an even number of equal lines that lands on a newline).
 */
export function midWriteCut(lines: readonly Buffer[]): number {
  const total = lines.reduce((n, l) => n + l.length, 0);
  const last = lines[lines.length - 1];
  if (!last || last.length < 2) return total;
  return total - Math.ceil(last.length / 2);
}

export interface LifecycleLogRecovery {
  entriesIndexed: number;
  warnings: string[];
}

interface Keyed {
  bundle_id: string;
}

export class LifecycleLog<TEntry extends Keyed> {
  /** Insertion-ordered by each bundle's first entry (its submission); the oldest submissions are evicted first. */
  private readonly index = new Map<string, TEntry>();
  private file!: FileHandle;
  private pending: Array<{ line: string; resolve: () => void; reject: (e: unknown) => void }> = [];
  private flushing: Promise<void> | null = null;
  private readonly indexSize: number;
  /** Whether some bundle of the file is not in the index (evicted, or before the tail read at start-up). */
  private partial = false;
  readonly counters = { appended: 0, writeErrors: 0 };

  private constructor(
    readonly path: string,
    private readonly options: LifecycleLogOptions,
  ) {
    this.indexSize = options.indexSize ?? 10_000;
  }

  static async open<TEntry extends Keyed>(
    path: string,
    options: LifecycleLogOptions = {},
  ): Promise<{ log: LifecycleLog<TEntry>; recovery: LifecycleLogRecovery }> {
    await mkdir(dirname(path), { recursive: true });
    const log = new LifecycleLog<TEntry>(path, options);
    const recovery = await log.load();
    log.file = await open(path, 'a');
    return { log, recovery };
  }

  /** Record a bundle's entry as it is now. The in-memory view updates at once; the write is batched. */
  append(entry: TEntry): Promise<void> {
    this.remember(entry);
    const line = JSON.stringify(entry) + '\n';
    return new Promise((resolve, reject) => {
      this.pending.push({ line, resolve, reject });
      if (!this.flushing) {
        this.flushing = new Promise<void>((r) => setImmediate(r)).then(() => this.flush());
      }
    });
  }

  get(bundleId: string): TEntry | undefined {
    return this.index.get(bundleId);
  }

  /** The latest entry of a bundle, scanning the whole file when it is no longer indexed. */
  async find(bundleId: string): Promise<TEntry | undefined> {
    const hit = this.index.get(bundleId);
    if (hit) return hit;
    await this.drain();
    let found: TEntry | undefined;
    const lines = createInterface({ input: createReadStream(this.path), crlfDelay: Infinity });
    const needle = `"bundle_id":"${bundleId}"`;
    for await (const line of lines) {
      if (!line.includes(needle)) continue;
      try {
        const entry = JSON.parse(line) as TEntry;
        if (entry.bundle_id === bundleId) found = entry;
      } catch {
        /* a torn line: skip */
      }
    }
    return found;
  }

  /** The latest entries of the `n` most recently submitted bundles, most recent last. */
  recent(n: number): TEntry[] {
    const all = [...this.index.values()];
    return n >= all.length ? all : all.slice(all.length - n);
  }

  get size(): number {
    return this.index.size;
  }

  /** True when the index holds every bundle the file has: a bundle it lacks was never written. */
  get indexesWholeFile(): boolean {
    return !this.partial;
  }

  /** The earliest-submitted bundle still in the index. */
  oldest(): TEntry | undefined {
    return this.index.values().next().value;
  }

  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  async close(): Promise<void> {
    await this.drain();
    await this.file.close();
  }

  private remember(entry: TEntry): void {
    // Setting an existing key keeps its place: the index stays in order of each bundle's first entry (its
    // submission), so "most recent last" means most recently submitted, not most recently updated.
    this.index.set(entry.bundle_id, entry);
    if (this.index.size > this.indexSize) {
      const oldest = this.index.keys().next().value as string;
      this.index.delete(oldest);
      this.partial = true;
    }
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending;
      this.pending = [];
      try {
        const hook = this.options.crashPoint;
        if (hook && (hook.armed?.('lifecycle.mid-write') ?? true)) {
          // Write up to half-way through the last line first, so a crash here leaves exactly the torn tail recovery
          // must handle. Cut in bytes: a cut inside a multi-byte character still writes the same bytes overall.
          const lines = batch.map((p) => Buffer.from(p.line));
          const bytes = Buffer.concat(lines);
          const cut = midWriteCut(lines);
          await this.file.write(bytes.subarray(0, cut));
          hook('lifecycle.mid-write');
          await this.file.write(bytes.subarray(cut));
        } else {
          await this.file.write(batch.map((p) => p.line).join(''));
        }
        await this.file.datasync();
        this.counters.appended += batch.length;
        for (const p of batch) p.resolve();
      } catch (error) {
        this.counters.writeErrors++;
        for (const p of batch) p.reject(error);
      }
    }
    this.flushing = null;
  }

  private async load(): Promise<LifecycleLogRecovery> {
    const warnings: string[] = [];
    let size: number;
    try {
      size = (await stat(this.path)).size;
    } catch {
      return { entriesIndexed: 0, warnings };
    }
    if (size === 0) return { entriesIndexed: 0, warnings };
    const tailBytes = this.options.tailBytes ?? 32 * 1024 * 1024;
    const start = Math.max(0, size - tailBytes);
    const handle = await open(this.path, 'r+');
    try {
      const buffer = Buffer.alloc(size - start);
      await handle.read(buffer, 0, buffer.length, start);
      let offset = 0;
      if (start > 0) {
        this.partial = true;
        // Starting mid-file: skip the partial first line.
        const nl = buffer.indexOf(0x0a);
        offset = nl === -1 ? buffer.length : nl + 1;
      }
      let validEnd = offset;
      while (offset < buffer.length) {
        const nl = buffer.indexOf(0x0a, offset);
        if (nl === -1) break;
        const line = buffer.subarray(offset, nl).toString('utf8');
        offset = nl + 1;
        if (line.length === 0) {
          validEnd = offset;
          continue;
        }
        try {
          this.remember(JSON.parse(line) as TEntry);
        } catch {
          warnings.push(`lifecycle log: skipped an unreadable line at byte ${start + validEnd}`);
        }
        validEnd = offset;
      }
      if (validEnd < buffer.length) {
        warnings.push(
          `lifecycle log: skipped a torn last line (${buffer.length - validEnd} bytes) left by a crash`,
        );
        // Cut it so the next entry starts on its own line.
        await handle.truncate(start + validEnd);
        await handle.sync();
      }
    } finally {
      await handle.close();
    }
    return { entriesIndexed: this.index.size, warnings };
  }
}
