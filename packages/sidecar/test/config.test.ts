import { hostname } from 'node:os';
import { isRelayError } from '@solrelay/core';
import { configFromEnv, DEFAULTS } from '../src/config';

const minimal = {
  STREAM_ENDPOINT: 'http://127.0.0.1:10000',
  RPC_URL: 'http://127.0.0.1:8899',
  HOME: '/home/op',
};

function errorOf(env: Record<string, string>): { code: string; message: string } {
  try {
    configFromEnv(env, '/srv/relay');
  } catch (error) {
    if (isRelayError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('expected configFromEnv to throw');
}

test('the spec defaults apply when only the required variables are set', () => {
  const config = configFromEnv(minimal, '/srv/relay');
  expect(config).toMatchObject({
    apiPort: 7777,
    apiHost: '127.0.0.1',
    decisionMode: 'cortex',
    bypass: false,
    bypassTipLamports: 10_000,
    bundleEngineUrls: DEFAULTS.bundleEngineUrls.split(','),
    bundleEngineTransport: 'jsonrpc',
    keypairPath: '/home/op/.config/solana/id.json',
    policyFile: '/srv/relay/relay.policy.json',
    lifecyclePath: '/srv/relay/lifecycle.jsonl',
    agentDir: '/srv/agents',
    webDir: '/srv/web',
    agentGraceSeconds: 10,
  });
});

test.each([
  [{ RPC_URL: 'http://x' }, 'RELAY_E_CONFIG_MISSING_ENV', /STREAM_ENDPOINT/],
  [{ STREAM_ENDPOINT: 'http://x' }, 'RELAY_E_CONFIG_MISSING_ENV', /RPC_URL/],
  [{ ...minimal, RPC_URL: 'not a url' }, 'RELAY_E_CONFIG_INVALID_ENV', /RPC_URL/],
  [{ ...minimal, API_PORT: '70000' }, 'RELAY_E_CONFIG_INVALID_ENV', /API_PORT/],
  [
    { ...minimal, AGENT_DECISION_MODE: 'smart' },
    'RELAY_E_CONFIG_INVALID_ENV',
    /AGENT_DECISION_MODE.*cortex, reflex/,
  ],
  [{ ...minimal, BYPASS_AGENT: 'yes' }, 'RELAY_E_CONFIG_INVALID_ENV', /BYPASS_AGENT/],
  [{ ...minimal, BYPASS_TIP_LAMPORTS: '10.5' }, 'RELAY_E_CONFIG_INVALID_ENV', /BYPASS_TIP_LAMPORTS/],
  [
    { ...minimal, BUNDLE_ENGINE_TRANSPORT: 'carrier-pigeon' },
    'RELAY_E_CONFIG_INVALID_ENV',
    /BUNDLE_ENGINE_TRANSPORT/,
  ],
])('a bad environment stops start-up naming the variable (%#)', (env, code, message) => {
  const error = errorOf(env as Record<string, string>);
  expect(error.code).toBe(code);
  expect(error.message).toMatch(message);
});

test('bypass, its tip and the other overrides are read', () => {
  const config = configFromEnv(
    {
      ...minimal,
      BYPASS_AGENT: '1',
      BYPASS_TIP_LAMPORTS: '25000',
      AGENT_DECISION_MODE: 'reflex',
      API_PORT: '0',
      KEYPAIR_PATH: 'keys/tipper.json',
    },
    '/srv/relay',
  );
  expect(config.bypass).toBe(true);
  expect(config.bypassTipLamports).toBe(25_000);
  expect(config.decisionMode).toBe('reflex');
  expect(config.apiPort).toBe(0);
  expect(config.keypairPath).toBe('/srv/relay/keys/tipper.json');
  expect(config.keypairPaths).toEqual(['/srv/relay/keys/tipper.json']);
});

test('KEYPAIR_PATH may list a pool of tippers, comma-separated; a file listed twice is refused', () => {
  const config = configFromEnv(
    { ...minimal, KEYPAIR_PATH: ' keys/a.json, /etc/relay/b.json ,keys/c.json' },
    '/srv/relay',
  );
  expect(config.keypairPaths).toEqual([
    '/srv/relay/keys/a.json',
    '/etc/relay/b.json',
    '/srv/relay/keys/c.json',
  ]);
  expect(config.keypairPath).toBe('/srv/relay/keys/a.json');
  expect(configFromEnv(minimal, '/srv/relay').keypairPaths).toEqual(['/home/op/.config/solana/id.json']);
  const twice = errorOf({ ...minimal, KEYPAIR_PATH: 'keys/a.json,/srv/relay/keys/a.json' });
  expect(twice.code).toBe('RELAY_E_CONFIG_INVALID_ENV');
  expect(twice.message).toMatch(/KEYPAIR_PATH.*\/srv\/relay\/keys\/a\.json is listed twice/);
});

test('the journal compaction threshold: 64 MiB by default, set by RELAY_JOURNAL_COMPACT_BYTES, 0 never', () => {
  expect(configFromEnv(minimal, '/srv/relay').journalCompactBytes).toBe(64 * 1024 * 1024);
  expect(configFromEnv({ ...minimal, RELAY_JOURNAL_COMPACT_BYTES: '0' }, '/srv').journalCompactBytes).toBe(0);
  expect(errorOf({ ...minimal, RELAY_JOURNAL_COMPACT_BYTES: '1MB' }).message).toMatch(
    /RELAY_JOURNAL_COMPACT_BYTES/,
  );
});

test('RELAY_ALLOWED_HOSTS and RELAY_SSE_BUFFER_BYTES: defaults, lists, and bad values', () => {
  const defaults = configFromEnv(minimal, '/srv/relay');
  expect(defaults.allowedHosts).toEqual([]);
  expect(defaults.sseBufferBytes).toBe(4 * 1024 * 1024);
  const set = configFromEnv(
    { ...minimal, RELAY_ALLOWED_HOSTS: ' Relay.Internal , [::1],box-2 ', RELAY_SSE_BUFFER_BYTES: '65536' },
    '/srv/relay',
  );
  expect(set.allowedHosts).toEqual(['relay.internal', '[::1]', 'box-2']);
  expect(set.sseBufferBytes).toBe(65_536);
  expect(configFromEnv({ ...minimal, RELAY_ALLOWED_HOSTS: '*' }, '/srv/relay').allowedHosts).toEqual(['*']);
  expect(errorOf({ ...minimal, RELAY_ALLOWED_HOSTS: 'http://relay.internal' }).message).toMatch(
    /RELAY_ALLOWED_HOSTS/,
  );
  expect(errorOf({ ...minimal, RELAY_SSE_BUFFER_BYTES: '100' }).message).toMatch(/RELAY_SSE_BUFFER_BYTES/);
});

test('RELAY_WEBHOOK_URL and RELAY_WEBHOOK_SECRET: none by default; a list with a valid secret; each mistake named', () => {
  const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
  expect(configFromEnv(minimal, '/srv/relay')).toMatchObject({ webhookUrls: [], webhookSecret: undefined });
  expect(
    configFromEnv(
      {
        ...minimal,
        RELAY_WEBHOOK_URL: ' https://a.example/hook , http://127.0.0.1:9000/x',
        RELAY_WEBHOOK_SECRET: secret,
      },
      '/srv/relay',
    ),
  ).toMatchObject({
    webhookUrls: ['https://a.example/hook', 'http://127.0.0.1:9000/x'],
    webhookSecret: secret,
  });
  const withUrl = { ...minimal, RELAY_WEBHOOK_URL: 'https://a.example/hook' };
  expect(errorOf(withUrl).message).toMatch(/RELAY_WEBHOOK_SECRET.*give the signing secret/);
  expect(errorOf({ ...withUrl, RELAY_WEBHOOK_SECRET: 'hunter2' }).message).toMatch(
    /RELAY_WEBHOOK_SECRET.*whsec_/,
  );
  expect(errorOf({ ...withUrl, RELAY_WEBHOOK_SECRET: 'whsec_c2hvcnQ=' }).message).toMatch(/24 bytes/);
  expect(
    errorOf({ ...minimal, RELAY_WEBHOOK_URL: 'ftp://a.example/x', RELAY_WEBHOOK_SECRET: secret }).message,
  ).toMatch(/RELAY_WEBHOOK_URL/);
  expect(
    errorOf({
      ...minimal,
      RELAY_WEBHOOK_URL: 'https://a.example/x,https://a.example/x',
      RELAY_WEBHOOK_SECRET: secret,
    }).message,
  ).toMatch(/listed twice/);
  const withCredentials = errorOf({
    ...minimal,
    RELAY_WEBHOOK_URL: 'https://user:hunter2@a.example/x',
    RELAY_WEBHOOK_SECRET: secret,
  }).message;
  expect(withCredentials).toMatch(/credentials in the URL are not supported/);
  expect(withCredentials).not.toContain('hunter2');
});

describe('regional block engines', () => {
  test("the default is Jito's eight regions, JSON-RPC and gRPC on the same hosts", () => {
    const config = configFromEnv(minimal, '/srv/relay');
    expect(config.bundleEngineUrls).toHaveLength(8);
    expect(config.bundleEngineUrls[0]).toBe('https://amsterdam.mainnet.block-engine.jito.wtf');
    expect(config.bundleEngineGrpcUrls[7]).toBe('https://tokyo.mainnet.block-engine.jito.wtf:443');
  });

  test('one list given alone gives the other on the same https hosts', () => {
    const json = configFromEnv(
      { ...minimal, BUNDLE_ENGINE_URL: 'https://ny.mainnet.block-engine.jito.wtf' },
      '/srv/relay',
    );
    expect(json.bundleEngineUrls).toEqual(['https://ny.mainnet.block-engine.jito.wtf']);
    expect(json.bundleEngineGrpcUrls).toEqual(['https://ny.mainnet.block-engine.jito.wtf:443']);
    const grpc = configFromEnv(
      {
        ...minimal,
        BUNDLE_ENGINE_GRPC_URL:
          'https://ny.mainnet.block-engine.jito.wtf:443,https://slc.mainnet.block-engine.jito.wtf',
      },
      '/srv/relay',
    );
    expect(grpc.bundleEngineUrls).toEqual([
      'https://ny.mainnet.block-engine.jito.wtf',
      'https://slc.mainnet.block-engine.jito.wtf',
    ]);
  });

  test.each([
    [{ BUNDLE_ENGINE_URL: 'http://127.0.0.1:9000' }, /BUNDLE_ENGINE_GRPC_URL.*only https/],
    [{ BUNDLE_ENGINE_URL: 'https://a.example,https://a.example' }, /BUNDLE_ENGINE_URL.*listed twice/],
    [{ BUNDLE_ENGINE_URL: 'https://a.example,not a url' }, /BUNDLE_ENGINE_URL.*not a URL/],
    [
      {
        BUNDLE_ENGINE_URL: 'https://a.example,https://b.example,https://c.example',
        BUNDLE_ENGINE_GRPC_URL: 'https://a.example:443,https://b.example:443',
      },
      /BUNDLE_ENGINE_GRPC_URL.*2 addresses for BUNDLE_ENGINE_URL's 3/,
    ],
  ])('%j is refused with a message naming the variable', (env, message) => {
    expect(() => configFromEnv({ ...minimal, ...env }, '/srv/relay')).toThrow(message);
  });
});

test('RELAY_DATABASE_URL: unset keeps the local journal; a postgres URL is kept; each mistake named without the password', () => {
  expect(configFromEnv(minimal, '/srv/relay').databaseUrl).toBeUndefined();
  expect(configFromEnv({ ...minimal, RELAY_DATABASE_URL: '  ' }, '/srv/relay').databaseUrl).toBeUndefined();
  const good = 'postgresql://relay:s3cret@db.internal:5433/relay?sslmode=require';
  expect(configFromEnv({ ...minimal, RELAY_DATABASE_URL: ` ${good} ` }, '/srv/relay').databaseUrl).toBe(good);
  for (const [url, reason] of [
    ['mysql://relay:s3cret@db/relay', /expected postgres:\/\/ or postgresql:\/\//],
    ['postgres://relay:s3cret@db.internal:5432', /name one database/],
    ['postgres://relay:s3cret@db:99999/relay', /not a URL/],
    ['postgres://:s3cret@db/relay', /no user/],
    ['relay:s3cret@db/relay', /expected postgres|not a URL/],
  ] as const) {
    const error = errorOf({ ...minimal, RELAY_DATABASE_URL: url });
    expect([url, error.code]).toEqual([url, 'RELAY_E_DB_INVALID_URL']);
    expect(error.message).toMatch(reason);
    expect(error.message).not.toContain('s3cret');
  }
});

test('RELAY_HOST_ID defaults to <hostname>:<API_PORT>; RELAY_LEASE_MS defaults to 5 s; each mistake named', () => {
  const config = configFromEnv({ ...minimal, API_PORT: '7801' }, '/srv/relay');
  // The machine's name, any character outside printable ASCII replaced: the default is never refused.
  expect(config.hostId).toBe(
    `${
      hostname()
        .replace(/[^\x21-\x7e]/g, '-')
        .slice(0, 120) || 'relay'
    }:7801`,
  );
  expect(config.hostId).toMatch(/^[\x21-\x7e]{1,128}$/);
  expect(config.leaseMs).toBe(5_000);
  const set = configFromEnv(
    { ...minimal, RELAY_HOST_ID: ' relay-a.eu-1 ', RELAY_LEASE_MS: '8000' },
    '/srv/relay',
  );
  expect([set.hostId, set.leaseMs]).toEqual(['relay-a.eu-1', 8_000]);
  for (const [env, message] of [
    [{ RELAY_HOST_ID: 'two words' }, /RELAY_HOST_ID.*printable ASCII characters without spaces/],
    [{ RELAY_HOST_ID: 'x'.repeat(129) }, /RELAY_HOST_ID/],
    [{ RELAY_HOST_ID: 'héte' }, /RELAY_HOST_ID/],
    [{ RELAY_LEASE_MS: '999' }, /RELAY_LEASE_MS.*from 1000 to 600000/],
    [{ RELAY_LEASE_MS: '5s' }, /RELAY_LEASE_MS/],
  ] as const) {
    const error = errorOf({ ...minimal, ...env });
    expect([env, error.code]).toEqual([env, 'RELAY_E_CONFIG_INVALID_ENV']);
    expect(error.message).toMatch(message);
  }
});

test('RELAY_FLEET is off by default, on only beside RELAY_DATABASE_URL, and a flag', () => {
  expect(configFromEnv(minimal, '/srv/relay').fleet).toBe(false);
  const db = { RELAY_DATABASE_URL: 'postgres://relay@db.internal/relay' };
  expect(configFromEnv({ ...minimal, ...db, RELAY_FLEET: '1' }, '/srv/relay').fleet).toBe(true);
  expect(configFromEnv({ ...minimal, ...db, RELAY_FLEET: 'true' }, '/srv/relay').fleet).toBe(true);
  expect(configFromEnv({ ...minimal, ...db, RELAY_FLEET: '0' }, '/srv/relay').fleet).toBe(false);
  for (const [env, message] of [
    [{ RELAY_FLEET: '1' }, /RELAY_FLEET.*set RELAY_DATABASE_URL too/],
    [{ ...db, RELAY_FLEET: 'yes' }, /RELAY_FLEET/],
  ] as const) {
    const error = errorOf({ ...minimal, ...env });
    expect([env, error.code]).toEqual([env, 'RELAY_E_CONFIG_INVALID_ENV']);
    expect(error.message).toMatch(message);
  }
});
