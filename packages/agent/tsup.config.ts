import { defineConfig } from 'tsup';
import { libraryConfig } from '../../tooling/tsup.base';

export default defineConfig(libraryConfig({ index: 'src/index.ts' }));
