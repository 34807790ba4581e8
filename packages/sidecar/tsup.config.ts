import { defineConfig } from 'tsup';
import { copyGeyserProto, libraryConfig } from '../../tooling/tsup.base';

// The geyser proto is read at run time; ship a copy beside the built files so the published package is whole.
// `pg` (the PostgreSQL connection and migrations) is an entry of its own, so `relay db` loads it without the service.
// The SQL migrations are read at run time from the package's migrations/ folder (listed in `files`).
export default defineConfig(
  libraryConfig(
    { index: 'src/index.ts', pg: 'src/pg/index.ts' },
    { shims: true, onSuccess: copyGeyserProto },
  ),
);
