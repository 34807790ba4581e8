import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import ts from 'typescript';
import * as main from '../src';
import * as wire from '../src/wire';

const SRC = join(__dirname, '..', 'src');

/**
 * The specifiers a module loads at run time: `import type`, `export type` and imports whose every binding is a
 * type are left out, because the compiler erases them.
 */
function runtimeImports(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
  const specifiers: string[] = [];
  for (const statement of source.statements) {
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause;
      if (clause?.isTypeOnly) continue;
      const bindings = clause?.namedBindings;
      const onlyTypes =
        clause !== undefined &&
        clause.name === undefined &&
        bindings !== undefined &&
        ts.isNamedImports(bindings) &&
        bindings.elements.length > 0 &&
        bindings.elements.every((element) => element.isTypeOnly);
      if (!onlyTypes) specifiers.push((statement.moduleSpecifier as ts.StringLiteral).text);
    } else if (ts.isExportDeclaration(statement) && statement.moduleSpecifier && !statement.isTypeOnly) {
      specifiers.push((statement.moduleSpecifier as ts.StringLiteral).text);
    }
  }
  return specifiers;
}

/** Every package (bare specifier) reachable at run time from `entry` through relative imports. */
function packagesReachedFrom(entry: string): { files: string[]; packages: string[] } {
  const seen = new Set<string>();
  const packages = new Set<string>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop() as string;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const specifier of runtimeImports(file)) {
      if (specifier.startsWith('.')) queue.push(resolve(dirname(file), `${specifier}.ts`));
      else packages.add(specifier);
    }
  }
  return {
    files: [...seen].map((file) => file.slice(SRC.length + 1)).sort(),
    packages: [...packages].sort(),
  };
}

describe('the wire entry (@solrelay/core/wire)', () => {
  it('exports the values the client needs', () => {
    const needed = [
      'RELAY_EVENT_NAMES',
      'TX_PROGRESS_PATH',
      'isTerminalTxState',
      'RelayError',
      'isRelayError',
      'relayErrorFromBody',
      'parseSseEventId',
      'formatSseEventId',
    ];
    expect(needed.filter((name) => !(name in wire))).toEqual([]);
  });

  it('exports each value as the very same object the main entry exports', () => {
    const wireValues = wire as unknown as Record<string, unknown>;
    const mainValues = main as unknown as Record<string, unknown>;
    const names = Object.keys(wireValues);
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((name) => !(name in mainValues) || mainValues[name] !== wireValues[name])).toEqual(
      [],
    );
  });

  it('reaches no package at run time (no zod, @noble/hashes or bs58), only core modules without them', () => {
    const reached = packagesReachedFrom(join(SRC, 'wire.ts'));
    expect(reached.packages).toEqual([]);
    // The walk really followed the re-exports (an empty walk would pass the line above vacuously).
    expect(reached.files).toEqual(['errors.ts', 'events.ts', 'states.ts', 'wire.ts']);
  });

  it('is published like the main entry: ESM, CJS and declarations for each', () => {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as {
      exports: Record<string, unknown>;
    };
    const mainEntry = JSON.stringify(pkg.exports['.']);
    expect(pkg.exports['./wire']).toEqual(JSON.parse(mainEntry.replaceAll('/index.', '/wire.')));
  });
});
