import { defineConfig } from 'tsup';
import { libraryConfig } from '../../tooling/tsup.base';

// Two entries: the full core, and `wire` (the zod-free values the client needs). Splitting puts the modules both
// use in one shared chunk, so `RelayError` is one class whichever entry a program loads it through.
export default defineConfig(
  libraryConfig({ index: 'src/index.ts', wire: 'src/wire.ts' }, { splitting: true }),
);
