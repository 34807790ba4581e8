import { defineConfig } from 'tsup';

// A process, not a library: one CommonJS file with a shebang; dependencies stay in node_modules.
export default defineConfig({
  entry: { main: 'src/main.ts' },
  format: ['cjs'],
  target: 'node20',
  sourcemap: true,
  clean: true,
  banner: { js: '#!/usr/bin/env node' },
});
