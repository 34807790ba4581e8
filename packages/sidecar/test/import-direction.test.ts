import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

/**
 * A transaction's path through the sidecar reads as its folders, one way:
 *
 *   intake → deciders → attempts → send → track → settle
 *
 * A stage may use what comes after it on the path (a decider submits through attempts; sending settles what the
 * engine answered), never what comes before it: tracking does not reach back into sending, settling never calls a
 * decider. What a later stage needs of an earlier one it declares as a port of its own (`PackingPort` in track,
 * the settle signals bypass subscribes to), and the composition (`relay.ts`) wires them. Shared facts live off the
 * path (`chain/`, `upstream/`, `store/`, `@solrelay/core`). Type-only imports count too: a type is a dependency.
 *
 * Off the path: `store/` (the system of record) and the plumbing every stage may use import no stage at all.
 */
const PATH = ['intake', 'deciders', 'attempts', 'send', 'track', 'settle'] as const;
const NO_STAGE_IMPORTS = ['store', 'chain', 'upstream', 'util', 'wire', 'journal', 'runtime', 'engine'];

const SRC = join(__dirname, '..', 'src');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
  });
}

/** Every relative import of the sidecar's sources: [importing folder, imported folder, file]. */
function edges(): Array<[string, string, string]> {
  const out: Array<[string, string, string]> = [];
  for (const file of files(SRC)) {
    const from = relative(SRC, file).split(sep)[0] as string;
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:import|export)[^'";]*?from\s+'(\.{1,2}\/[^']+)'/g)) {
      const target = relative(SRC, join(file, '..', m[1] as string)).split(sep)[0] as string;
      if (target !== from) out.push([from, target, relative(SRC, file)]);
    }
  }
  return out;
}

test('the scan sees the imports it judges (a broken pattern would pass everything)', () => {
  const all = edges();
  expect(all.length).toBeGreaterThan(50);
  expect(all).toContainEqual(['deciders', 'attempts', 'deciders/bypass.ts']);
  expect(all).toContainEqual(['send', 'settle', 'send/sender.ts']);
});

test('no stage imports a stage before it on the path', () => {
  const against = edges().filter(([from, to]) => {
    const i = PATH.indexOf(from as (typeof PATH)[number]);
    const j = PATH.indexOf(to as (typeof PATH)[number]);
    return i >= 0 && j >= 0 && j < i;
  });
  expect(against).toEqual([]);
});

test('the store and the plumbing import no stage', () => {
  const stages = new Set<string>([...PATH, 'recovery', 'http', 'views']);
  const bad = edges().filter(([from, to]) => NO_STAGE_IMPORTS.includes(from) && stages.has(to));
  expect(bad).toEqual([]);
});
