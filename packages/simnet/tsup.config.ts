import { defineConfig } from 'tsup';
import { libraryConfig } from '../../tooling/tsup.base';

// src/bin.ts starts with `#!/usr/bin/env node`; esbuild keeps a leading hashbang, so only the bin outputs carry it
// (and tsup marks them executable).
export default defineConfig(libraryConfig({ index: 'src/index.ts', bin: 'src/bin.ts' }));
