import { defineConfig } from 'tsup';
import { copyGeyserProto, libraryConfig } from '../../tooling/tsup.base';

// The geyser proto is read at run time; ship a copy beside the built files so the published package is whole.
export default defineConfig(
  libraryConfig({ index: 'src/index.ts' }, { shims: true, onSuccess: copyGeyserProto }),
);
