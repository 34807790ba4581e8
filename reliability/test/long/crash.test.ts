import { crashSuite } from '../../src/crash-suite';

// The crash suite (see src/crash-suite.ts) with the sidecar on its default store, the local journal.
crashSuite('journal');
