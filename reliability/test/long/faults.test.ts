import { faultsSuite } from '../../src/faults-suite';

// The upstream fault matrix (see src/faults-suite.ts) with the sidecar on its default store, the local journal.
faultsSuite('journal');
