import { crashSuite } from '../../src/crash-suite';

// The crash suite (see src/crash-suite.ts) with the sidecar on PostgreSQL: each trial its own fresh migrated
// database (RELAY_DATABASE_URL), on the testkit's server shared by the run (jest.reliability.cjs's globalSetup).
crashSuite('postgres');
