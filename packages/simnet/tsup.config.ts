import { copyFileSync, mkdirSync } from 'node:fs';
import { defineConfig } from 'tsup';
import { libraryConfig } from '../../tooling/tsup.base';

// src/bin.ts starts with `#!/usr/bin/env node`; esbuild keeps a leading hashbang, so only the bin outputs carry it
// (and tsup marks them executable).
// The Yellowstone proto is read at run time: ship a copy in dist/protos so an installed package is whole, and shim
// __dirname in the ESM outputs so src/geyser/proto.ts finds it next to the module file in both formats.
export default defineConfig(
  libraryConfig(
    { index: 'src/index.ts', bin: 'src/bin.ts' },
    {
      shims: true,
      onSuccess: async () => {
        mkdirSync('dist/protos', { recursive: true });
        copyFileSync('../../protos/geyser.proto', 'dist/protos/geyser.proto');
      },
    },
  ),
);
