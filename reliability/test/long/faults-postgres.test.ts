import { faultsSuite } from '../../src/faults-suite';

// The upstream fault matrix (see src/faults-suite.ts) with the sidecar on PostgreSQL: a fresh migrated database
// (RELAY_DATABASE_URL) on the testkit's server shared by the run (jest.reliability.cjs's globalSetup).
faultsSuite('postgres');
