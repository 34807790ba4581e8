import { defineConfig } from 'tsup';
import { libraryConfig } from '../../tooling/tsup.base';

// The two builds run in parallel into one dist/, so neither cleans it: the build script empties it first.
export default defineConfig([
  // The programmatic API: ESM + CJS + declarations like every library package.
  libraryConfig({ index: 'src/index.ts' }, { clean: false }),
  // The `relay` binary: one CommonJS file with a shebang; dependencies stay in node_modules.
  {
    entry: { bin: 'src/bin.ts' },
    format: ['cjs'],
    target: 'node20',
    sourcemap: true,
    clean: false,
    outDir: 'dist',
    banner: { js: '#!/usr/bin/env node' },
  },
]);
