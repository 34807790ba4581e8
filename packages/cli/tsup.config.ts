import { defineConfig } from 'tsup';
import { libraryConfig } from '../../tooling/tsup.base';

// Nothing empties dist/ before a build (no tsup `clean`, no rm in the build script): `pnpm relay` rebuilds the CLI
// on every run, and a `relay` started by another terminal during that rebuild must still find dist/bin.cjs. Each
// file is overwritten in place instead; a stale extra file from an older build is harmless (nothing imports it).
export default defineConfig([
  // The programmatic API: ESM + CJS + declarations like every library package.
  // shims: `__dirname` in the ESM build too (`relay up --hosts` starts its hosts with the `relay` binary beside it).
  libraryConfig({ index: 'src/index.ts' }, { clean: false, shims: true }),
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
