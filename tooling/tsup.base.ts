import type { Options } from 'tsup';

/**
 * The one build shape every library package uses: ESM + CJS + declarations for each entry.
 * Packages pass their entry map; nothing else varies, so the exports maps stay uniform.
 */
export function libraryConfig(entry: Record<string, string>, overrides: Partial<Options> = {}): Options {
  return {
    entry,
    format: ['esm', 'cjs'],
    dts: true,
    sourcemap: true,
    clean: true,
    target: 'node20',
    splitting: false,
    treeshake: true,
    outDir: 'dist',
    ...overrides,
  };
}
