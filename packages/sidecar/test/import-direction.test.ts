import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';

/**
 * The sidecar's modules are layered, and a transaction's path reads as its stage folders, one way:
 *
 *   intake → deciders → attempts → send → track → settle
 *
 * A module imports only from its own layer or a lower one; among the stages, only from a stage after it on the
 * path (tracking does not reach back into sending; settling never calls a decider: what a later stage needs of an
 * earlier one it declares as a port of its own, such as `PackingPort` in track, and `compose.ts` wires it). Every
 * top-level folder and file of `src/` has a layer here: a new one fails this test until it is placed. Type-only
 * imports count too: a type is a dependency. Checked over every `import`/`export ... from`, side-effect `import`
 * and dynamic `import()` with a relative path.
 */
const LAYERS: Record<string, number> = {
  // Foundations: no relay state.
  util: 0,
  wire: 0,
  journal: 0,
  'metrics.ts': 0,
  'config.ts': 0,
  policy: 0,
  lifecycle: 0,
  engine: 0,
  pg: 0,
  // The system of record, the upstream adapters, the event fan-out.
  store: 1,
  upstream: 1,
  events: 1,
  // Facts about the chain (position, blockhash validity, a tip's life).
  chain: 2,
  // What the stages share: the ports, the operator's state (mode, agents, tipper pool), the per-slot tick.
  'context.ts': 3,
  operator: 3,
  runtime: 3,
  // The stages, in path order (see PATH).
  intake: 4,
  deciders: 4,
  attempts: 4,
  send: 4,
  track: 4,
  settle: 4,
  // After the path: restart recovery and the read views.
  recovery: 5,
  views: 5,
  // The composition and its facade.
  'compose.ts': 6,
  'relay.ts': 6,
  // The edges: HTTP, health, webhooks, the chain inputs, the service and the package's entry.
  http: 7,
  health: 7,
  webhooks: 7,
  inputs: 7,
  'service.ts': 7,
  'index.ts': 7,
};
const PATH = ['intake', 'deciders', 'attempts', 'send', 'track', 'settle'];

const SRC = join(__dirname, '..', 'src');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
  });
}

/** The top-level entry of `src/` a path is in (a folder, or a root file). */
function topOf(path: string): string {
  const first = relative(SRC, path).split(sep)[0] as string;
  if (first.endsWith('.ts')) return first;
  return existsSync(join(SRC, `${first}.ts`)) && !existsSync(join(SRC, first)) ? `${first}.ts` : first;
}

const IMPORT =
  /(?:import|export)\s[^'";]*?from\s+'(\.{1,2}\/[^']+)'|import\s+'(\.{1,2}\/[^']+)'|import\(\s*'(\.{1,2}\/[^']+)'\s*\)/g;

/** Every relative import between two top-level entries: [from, to, file]. */
function edges(): Array<[string, string, string]> {
  const out: Array<[string, string, string]> = [];
  for (const file of files(SRC)) {
    const from = topOf(file);
    for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const spec = (m[1] ?? m[2] ?? m[3]) as string;
      const to = topOf(join(dirname(file), spec));
      if (to !== from) out.push([from, to, relative(SRC, file)]);
    }
  }
  return out;
}

test('the scan sees the imports it judges (a broken pattern would pass everything)', () => {
  const all = edges();
  expect(all.length).toBeGreaterThan(100);
  expect(all).toContainEqual(['deciders', 'attempts', 'deciders/bypass.ts']);
  expect(all).toContainEqual(['send', 'settle', 'send/sender.ts']);
  expect(all).toContainEqual(['compose.ts', 'context.ts', 'compose.ts']);
});

test('every top-level folder and file of src/ has a layer', () => {
  const entries = readdirSync(SRC).map((name) => topOf(join(SRC, name)));
  expect(entries.filter((e) => LAYERS[e] === undefined)).toEqual([]);
});

test('no module imports from a higher layer, and no stage from one before it on the path', () => {
  const bad = edges().filter(([from, to]) => {
    const [a, b] = [LAYERS[from] as number, LAYERS[to] as number];
    if (b > a) return true;
    const i = PATH.indexOf(from);
    const j = PATH.indexOf(to);
    return i >= 0 && j >= 0 && j < i;
  });
  expect(bad).toEqual([]);
});

test('the top-level entries import each other without a cycle', () => {
  const next = new Map<string, Set<string>>();
  for (const [from, to] of edges()) next.set(from, (next.get(from) ?? new Set()).add(to));
  const cycles: string[][] = [];
  const visit = (node: string, trail: string[]) => {
    for (const to of next.get(node) ?? []) {
      const at = trail.indexOf(to);
      if (at >= 0) cycles.push([...trail.slice(at), to]);
      else visit(to, [...trail, to]);
    }
  };
  for (const start of next.keys()) visit(start, [start]);
  expect(cycles).toEqual([]);
});
