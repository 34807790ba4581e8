import { defineConfig } from 'tsup';
import { libraryConfig } from '../../tooling/tsup.base';

// `postgres` on its own too: a jest globalSetup loads it without the simulated cluster and web3.js.
export default defineConfig(libraryConfig({ index: 'src/index.ts', postgres: 'src/postgres.ts' }));
