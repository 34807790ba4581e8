import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import {
  DEFAULT_POLICY,
  parsePolicyText,
  resolvePolicy,
  type Policy,
  type PolicyKey,
  type PolicyProblem,
  type PolicyView,
} from '@solrelay/core';

/**
 * The policy file is the single source of truth: the CLI edits it (atomic write: temp file + rename) and a running
 * sidecar reloads it. The directory is watched (a watch on the file itself dies on rename) and the file's stat is
 * polled each second as a backstop. An invalid file is refused whole: the last good policy stays in force and the
 * problems are shown in `/status` and `/policy`.
 */
export class PolicyStore {
  private values: Policy = { ...DEFAULT_POLICY };
  private overridden: PolicyKey[] = [];
  private problems: PolicyProblem[] = [];
  private watcher: FSWatcher | null = null;
  private poll: NodeJS.Timeout | null = null;
  private lastSignature = '';
  private reloading: Promise<void> | null = null;
  private pendingReload = false;

  constructor(
    readonly path: string,
    private readonly onChange: (change: {
      ok: boolean;
      values: Policy;
      overridden: PolicyKey[];
      problems: PolicyProblem[];
    }) => void = () => undefined,
  ) {}

  get current(): Policy {
    return this.values;
  }

  view(): PolicyView {
    const resolved = resolvePolicy(Object.fromEntries(this.overridden.map((k) => [k, this.values[k]])));
    return {
      values: { ...this.values },
      overridden: [...this.overridden],
      entries: resolved.entries,
      path: this.path,
      problems: [...this.problems],
    };
  }

  /** Load once; with `watch`, keep following the file. Throws nothing: a bad file keeps the defaults in force. */
  async start(options: { watch: boolean; pollMs?: number } = { watch: true }): Promise<void> {
    await this.reload();
    if (!options.watch) return;
    try {
      this.watcher = watch(dirname(this.path), { persistent: false }, (_event, name) => {
        if (!name || name === basename(this.path)) void this.reload();
      });
      this.watcher.on('error', () => undefined);
    } catch {
      this.watcher = null; // directory missing: the stat poll still notices when it appears
    }
    this.poll = setInterval(() => void this.reload(), options.pollMs ?? 1000);
    this.poll.unref();
  }

  stop(): void {
    this.watcher?.close();
    if (this.poll) clearInterval(this.poll);
  }

  /** Re-read the file if it changed. Concurrent calls coalesce. */
  reload(): Promise<void> {
    if (this.reloading) {
      this.pendingReload = true;
      return this.reloading;
    }
    this.reloading = this.doReload().finally(() => {
      this.reloading = null;
      if (this.pendingReload) {
        this.pendingReload = false;
        void this.reload();
      }
    });
    return this.reloading;
  }

  private async doReload(): Promise<void> {
    let text: string | null;
    let signature: string;
    try {
      // The content decides, not the stat: two saves in the same timestamp tick with the same size can even reuse
      // the inode freed by the rename before, and a stat signature then misses the second (the file is small).
      text = await readFile(this.path, 'utf8');
      signature = `text:${text}`;
      if (signature === this.lastSignature) return;
    } catch {
      signature = 'absent';
      if (signature === this.lastSignature) return;
      text = null;
    }
    this.lastSignature = signature;
    if (text === null) {
      // No file: every key at its default.
      this.apply({ ...DEFAULT_POLICY }, [], []);
      return;
    }
    const result = parsePolicyText(text);
    const errors = result.problems.filter((p) => p.severity === 'error');
    if (!result.ok || !result.policy || errors.length > 0) {
      this.problems = result.problems;
      this.onChange({ ok: false, values: this.values, overridden: this.overridden, problems: this.problems });
      return;
    }
    this.apply(result.policy, Object.keys(result.file ?? {}) as PolicyKey[], result.problems);
  }

  private apply(values: Policy, overridden: PolicyKey[], problems: PolicyProblem[]): void {
    this.values = values;
    this.overridden = overridden;
    this.problems = problems;
    this.onChange({ ok: true, values, overridden, problems });
  }
}
