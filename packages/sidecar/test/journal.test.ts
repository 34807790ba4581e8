import { readdirSync } from 'node:fs';
import { mkdtemp, open, readdir, appendFile, writeFile, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { constants } from 'node:fs';
import {
  appendFlags,
  durableAppend,
  Journal,
  JournalCorruptError,
  type JournalCodec,
} from '../src/journal/journal';

type Op = { k: 'set'; key: string; value: number } | { k: 'del'; key: string };
type State = Map<string, number>;

const codec: JournalCodec<State, Op> = {
  initial: () => new Map(),
  apply(state, op) {
    if (op.k === 'set') state.set(op.key, op.value);
    else state.delete(op.key);
  },
  *snapshot(state) {
    for (const [key, value] of state) yield { k: 'set', key, value };
  },
};

async function freshDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'relay-journal-'));
}

describe('Journal', () => {
  test('replays every committed operation after a reopen', async () => {
    const dir = await freshDir();
    const { journal } = await Journal.open(dir, codec);
    await journal.commit({ k: 'set', key: 'a', value: 1 });
    await journal.commit({ k: 'set', key: 'b', value: 2 });
    await journal.commit({ k: 'del', key: 'a' });
    await journal.close();
    const { journal: again, recovery } = await Journal.open(dir, codec);
    expect([...again.state]).toEqual([['b', 2]]);
    expect(recovery.operationsReplayed).toBe(3);
    expect(recovery.warnings).toEqual([]);
    await again.close();
  });

  test('applies an operation only once it is durable', async () => {
    const { journal } = await Journal.open(await freshDir(), codec);
    const pending = journal.commit({ k: 'set', key: 'x', value: 9 });
    expect(journal.state.has('x')).toBe(false);
    await pending;
    expect(journal.state.get('x')).toBe(9);
    await journal.close();
  });

  test('groups concurrent commits into far fewer fsynced batches', async () => {
    const { journal } = await Journal.open(await freshDir(), codec);
    await Promise.all(
      Array.from({ length: 1000 }, (_, i) => journal.commit({ k: 'set', key: `k${i}`, value: i })),
    );
    expect(journal.state.size).toBe(1000);
    expect(journal.metrics.commits).toBe(1000);
    expect(journal.metrics.batches).toBeLessThan(100);
    await journal.close();
  });

  test('survives a torn last line and keeps appending on a fresh line', async () => {
    const dir = await freshDir();
    const { journal } = await Journal.open(dir, codec);
    await journal.commit({ k: 'set', key: 'a', value: 1 });
    await journal.close();
    await appendFile(join(dir, 'journal-0.jsonl'), '{"k":"set","key":"torn","va');
    const { journal: reopened, recovery } = await Journal.open(dir, codec);
    expect(recovery.warnings).toHaveLength(1);
    expect(recovery.warnings[0]).toMatch(/torn last line/);
    expect([...reopened.state]).toEqual([['a', 1]]);
    await reopened.commit({ k: 'set', key: 'b', value: 2 });
    await reopened.close();
    const { journal: third, recovery: second } = await Journal.open(dir, codec);
    expect(second.warnings).toEqual([]);
    expect(Object.fromEntries(third.state)).toEqual({ a: 1, b: 2 });
    await third.close();
  });

  test('refuses to start on a corrupt line followed by acknowledged records', async () => {
    const dir = await freshDir();
    await writeFile(
      join(dir, 'journal-0.jsonl'),
      '{"k":"set","key":"a","value":1}\nGARBAGE\n{"k":"set","key":"b","value":2}\n',
    );
    await expect(Journal.open(dir, codec)).rejects.toBeInstanceOf(JournalCorruptError);
  });

  test('compaction keeps the state, drops old generations, and later commits survive', async () => {
    const dir = await freshDir();
    const { journal } = await Journal.open(dir, codec);
    for (let i = 0; i < 50; i++) await journal.commit({ k: 'set', key: `k${i % 10}`, value: i });
    const during = journal.compact();
    const concurrent = journal.commit({ k: 'set', key: 'late', value: 1 });
    await Promise.all([during, concurrent]);
    await journal.commit({ k: 'del', key: 'k0' });
    await journal.close();
    const files = (await readdir(dir)).sort();
    expect(files).toEqual(['journal-1.jsonl', 'snapshot-1.jsonl']);
    const { journal: reopened, recovery } = await Journal.open(dir, codec);
    expect(recovery.snapshotGeneration).toBe(1);
    expect(reopened.state.has('k0')).toBe(false);
    expect(reopened.state.get('k9')).toBe(49);
    expect(reopened.state.get('late')).toBe(1);
    expect(reopened.state.size).toBe(10);
    await reopened.close();
  });

  test('a snapshot larger than one serialization chunk (1 Mi chars) is written whole and read back', async () => {
    const dir = await freshDir();
    const { journal } = await Journal.open(dir, codec);
    // ~30,000 operations of ~60 characters each: about two chunks of lines, so a chunk boundary falls inside.
    const pad = 'k'.repeat(40);
    for (let i = 0; i < 30_000; i += 1000) {
      await Promise.all(
        Array.from({ length: 1000 }, (_, j) =>
          journal.commit({ k: 'set', key: `${pad}${i + j}`, value: i + j }),
        ),
      );
    }
    await journal.compact();
    await journal.close();
    const files = readdirSync(dir);
    expect(files.filter((f) => f.startsWith('snapshot-'))).toHaveLength(1);
    const snapshot = await readFile(
      join(dir, files.find((f) => f.startsWith('snapshot-')) as string),
      'utf8',
    );
    expect(snapshot.length).toBeGreaterThan(1 << 20);
    const lines = snapshot.split('\n');
    expect(lines.pop()).toBe(''); // ends with a newline
    expect(lines.pop()).toBe('{"end":30000}');
    expect(lines).toHaveLength(30_000);
    const { journal: reopened, recovery } = await Journal.open(dir, codec);
    expect(reopened.state.size).toBe(30_000);
    expect(reopened.state.get(`${pad}29999`)).toBe(29_999);
    expect(recovery.warnings).toEqual([]);
    await reopened.close();
  });

  test('compacts by itself once the file passes the size threshold', async () => {
    const dir = await freshDir();
    const { journal } = await Journal.open(dir, codec, { compactAtBytes: 2000 });
    for (let i = 0; i < 200; i++) await journal.commit({ k: 'set', key: 'same', value: i });
    await journal.close();
    expect(journal.metrics.compactions).toBeGreaterThan(0);
    const { journal: reopened } = await Journal.open(dir, codec);
    expect(reopened.state.get('same')).toBe(199);
    await reopened.close();
  });

  test('an interrupted snapshot (temp file left by a crash) is ignored', async () => {
    const dir = await freshDir();
    const { journal } = await Journal.open(dir, codec);
    await journal.commit({ k: 'set', key: 'a', value: 1 });
    await journal.close();
    await writeFile(join(dir, 'snapshot-1.jsonl.tmp'), '{"k":"set","key":"ghost","value":1}\n');
    const { journal: reopened } = await Journal.open(dir, codec);
    expect([...reopened.state]).toEqual([['a', 1]]);
    expect(await readdir(dir)).not.toContain('snapshot-1.jsonl.tmp');
    await reopened.close();
  });

  test('a snapshot without its trailer is not trusted', async () => {
    const dir = await freshDir();
    const { journal } = await Journal.open(dir, codec);
    await journal.commit({ k: 'set', key: 'a', value: 1 });
    await journal.compact();
    await journal.commit({ k: 'set', key: 'b', value: 2 });
    await journal.close();
    const snapshot = join(dir, 'snapshot-1.jsonl');
    const text = await readFile(snapshot, 'utf8');
    await writeFile(snapshot, text.split('\n').slice(0, -2).join('\n') + '\n'); // drop the {"end":N} line
    const { journal: reopened, recovery } = await Journal.open(dir, codec);
    expect(recovery.warnings.join()).toMatch(/incomplete/);
    await reopened.close();
  });

  test('the compaction crash points are four distinct steps: the snapshot fsync lies between written and rename', async () => {
    const dir = await freshDir();
    // Count fsyncs (FileHandle.sync) to tell the steps apart: the class is not exported, its prototype is reachable.
    const probe = await open(join(dir, 'probe'), 'w');
    const proto = Object.getPrototypeOf(probe) as { sync: () => Promise<void> };
    await probe.close();
    const sync = jest.spyOn(proto, 'sync');
    const seen: Array<{ name: string; syncs: number; files: string[] }> = [];
    const { journal } = await Journal.open(dir, codec, {
      crashPoint: (name) => {
        seen.push({ name, syncs: sync.mock.calls.length, files: readdirSync(dir).sort() });
      },
    });
    try {
      for (let i = 0; i < 5; i++) await journal.commit({ k: 'set', key: `k${i}`, value: i });
      sync.mockClear();
      await journal.compact();
    } finally {
      sync.mockRestore();
    }
    await journal.close();
    expect(seen.map((s) => s.name)).toEqual([
      'compaction.started',
      'compaction.snapshot-written',
      'compaction.before-rename',
      'compaction.renamed',
    ]);
    const step = (name: string) => seen.find((s) => s.name === name)!;
    const started = step('compaction.started');
    const written = step('compaction.snapshot-written');
    const beforeRename = step('compaction.before-rename');
    const renamed = step('compaction.renamed');
    expect(started.files).not.toContain('snapshot-1.jsonl.tmp');
    expect(written.files).toContain('snapshot-1.jsonl.tmp');
    // The snapshot's own fsync happens after `snapshot-written` and before `before-rename`.
    expect(beforeRename.syncs).toBe(written.syncs + 1);
    expect(beforeRename.files).toContain('snapshot-1.jsonl.tmp');
    expect(renamed.files).toContain('snapshot-1.jsonl');
    expect(renamed.files).not.toContain('snapshot-1.jsonl.tmp');
  });

  test.each([
    'compaction.started',
    'compaction.snapshot-written',
    'compaction.before-rename',
    'compaction.renamed',
  ] as const)('a compaction cut short at %s recovers every commit', async (point) => {
    const dir = await freshDir();
    let armed = false;
    const { journal } = await Journal.open(dir, codec, {
      // The crash: the second compaction stops right there, and the process never touches the files again.
      crashPoint: (name) => {
        if (armed && name === point) throw new Error(`crashed at ${name}`);
      },
    });
    for (let i = 0; i < 20; i++) await journal.commit({ k: 'set', key: `k${i}`, value: i });
    await journal.compact();
    await journal.commit({ k: 'del', key: 'k0' });
    armed = true;
    await expect(journal.compact()).rejects.toThrow(`crashed at ${point}`);
    await journal.commit({ k: 'set', key: 'late', value: 99 });
    const { journal: again, recovery } = await Journal.open(dir, codec);
    expect(new Map(again.state)).toEqual(new Map(journal.state));
    expect(again.state.has('k0')).toBe(false);
    expect(again.state.get('late')).toBe(99);
    expect(recovery.warnings).toEqual([]);
    await again.close();
  });

  test('commits after close are refused', async () => {
    const { journal } = await Journal.open(await freshDir(), codec);
    await journal.close();
    await expect(journal.commit({ k: 'set', key: 'a', value: 1 })).rejects.toThrow(/closed/);
  });
});

describe('durable appends', () => {
  test('O_DSYNC on Linux only; write + fdatasync elsewhere; nothing when fsync is off', () => {
    expect(durableAppend('linux', false)).toBe('o_dsync');
    expect(durableAppend('darwin', false)).toBe('write+fdatasync');
    expect(durableAppend('win32', false)).toBe('write+fdatasync');
    expect(durableAppend('linux', true)).toBe('none');
  });

  test('the live file is opened append-only, with O_DSYNC exactly when that mode is chosen', () => {
    const base = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT;
    expect(appendFlags('write+fdatasync')).toBe(base);
    expect(appendFlags('none')).toBe(base);
    expect(appendFlags('o_dsync') & constants.O_DSYNC).toBe(constants.O_DSYNC);
    expect(appendFlags('o_dsync') & base).toBe(base);
  });
});
