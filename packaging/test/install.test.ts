import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { PublicKey } from '@solana/web3.js';
import { configFromEnv, startSidecar, type Sidecar } from '@solrelay/sidecar';
import { startStack, type Stack } from '@solrelay/testkit';
import pino from 'pino';

/**
 * The packages as a user gets them (#18 item 3): each published package packed with `pnpm pack` (workspace
 * versions rewritten), the tarballs installed with npm into a fresh project outside the workspace, then loaded
 * from ESM and CommonJS, type-checked from TypeScript under node16 and bundler resolution, checked with
 * @arethetypeswrong/cli and publint, and a @solana/kit transaction taken to finalized through the installed client.
 * Third-party dependencies come from the npm registry (as for a user), so this needs it, like `pnpm install`.
 */

const ROOT = resolve(__dirname, '../..');
const PUBLISHED = ['core', 'client', 'sidecar', 'simnet', 'agent', 'cli'] as const;
const FIXTURES = resolve(__dirname, '../fixtures');
const run = promisify(execFile);

let work: string;
let project: string;
const tarballs = new Map<string, string>();

/** Run a command; on failure, the error carries its output (so the jest report shows why). */
async function sh(file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  try {
    const { stdout } = await run(file, args, {
      cwd,
      env: { ...process.env, ...env },
      maxBuffer: 64 * 1024 * 1024,
    });
    return stdout;
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(
      `${file} ${args.join(' ')} failed in ${cwd}:\n${e.stdout ?? ''}\n${e.stderr ?? ''}\n${e.message}`,
      { cause: error },
    );
  }
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'relay-install-'));
  const packed = join(work, 'tarballs');
  await mkdir(packed);
  // Side by side: each pack only reads its own package (CI's clock, not the machine, is what this spends).
  await Promise.all(
    PUBLISHED.map((name) => sh('pnpm', ['pack', '--pack-destination', packed], join(ROOT, 'packages', name))),
  );
  for (const file of await readdir(packed)) {
    const name = /^solrelay-(.+)-\d+\.\d+\.\d+\.tgz$/.exec(file)?.[1];
    if (name) tarballs.set(name, join(packed, file));
  }
  expect([...tarballs.keys()].sort()).toEqual([...PUBLISHED].sort());

  project = join(work, 'app');
  await mkdir(project);
  // The packages depend on each other by version: each is a direct dependency from its tarball, and overrides
  // (`$name`: the direct dependency's spec) make npm take the ones they depend on from there too.
  const names = [...tarballs.keys()].map((name) => `@solrelay/${name}`);
  const dependencies = Object.fromEntries(
    [...tarballs].map(([name, file]) => [`@solrelay/${name}`, `file:${file}`]),
  );
  await writeFile(
    join(project, 'package.json'),
    JSON.stringify(
      {
        name: 'fresh-app',
        version: '1.0.0',
        private: true,
        dependencies: { ...dependencies, '@solana/kit': '8.4.0', '@types/node': '^20.19.0' },
        overrides: Object.fromEntries(names.map((name) => [name, `$${name}`])),
      },
      null,
      2,
    ),
  );
  // --ignore-scripts: no dependency's install script runs (the workspace allows only a reviewed few); the packages
  // must load without them.
  await sh(
    'npm',
    ['install', '--no-audit', '--no-fund', '--prefer-offline', '--fetch-retries=4', '--ignore-scripts'],
    project,
  );
  for (const file of await readdir(FIXTURES)) await copyFile(join(FIXTURES, file), join(project, file));
  // The same consumer as an ES module and as CommonJS under node16 resolution.
  await copyFile(join(FIXTURES, 'consumer.ts'), join(project, 'consumer.mts'));
  await copyFile(join(FIXTURES, 'consumer.ts'), join(project, 'consumer.cts'));
});

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

const allLoaded = {
  core: true,
  'core/wire': true,
  client: true,
  sidecar: true,
  'sidecar/pg': true,
  simnet: true,
  agent: true,
  cli: true,
};

test('every package loads from ESM', async () => {
  expect(JSON.parse(await sh('node', ['load.mjs'], project))).toEqual(allLoaded);
});

test('every package loads from CommonJS', async () => {
  expect(JSON.parse(await sh('node', ['load.cjs'], project))).toEqual(allLoaded);
});

/** Every check's outcome, run side by side: each failure named, not only the first. */
async function allOf(checks: Array<[string, () => Promise<unknown>]>): Promise<string[]> {
  const failures: string[] = [];
  await Promise.all(
    checks.map(([name, check]) =>
      check().catch((error: unknown) => failures.push(`${name}: ${(error as Error).message}`)),
    ),
  );
  return failures;
}

test('the declarations type-check under node16 and under bundler resolution', async () => {
  const tsc = join(ROOT, 'node_modules/.bin/tsc');
  expect(
    await allOf(
      ['node16', 'bundler'].map((mode) => [mode, () => sh(tsc, ['-p', `tsconfig.${mode}.json`], project)]),
    ),
  ).toEqual([]);
});

test('the relay binary runs from the install', async () => {
  expect((await sh(join(project, 'node_modules/.bin/relay'), ['--version'], project)).trim()).toMatch(
    /^\d+\.\d+\.\d+/,
  );
});

test('every published package passes @arethetypeswrong/cli and publint --strict', async () => {
  const attw = join(__dirname, '../node_modules/.bin/attw');
  const publint = join(ROOT, 'node_modules/.bin/publint');
  const failures = await allOf(
    PUBLISHED.map((name) => {
      const tarball = tarballs.get(name) as string;
      return [
        `@solrelay/${name}`,
        async () => {
          const report = await sh(attw, [tarball, '--format', 'ascii'], work);
          if (!/No problems found/.test(report)) throw new Error(`attw:\n${report}`);
          await sh(publint, ['run', tarball, '--strict'], work);
        },
      ];
    }),
  );
  expect(failures).toEqual([]);
});

describe('against a running sidecar', () => {
  let stack: Stack<Sidecar>;

  beforeAll(async () => {
    stack = await startStack<Sidecar>({
      env: { BYPASS_AGENT: '1' },
      start: (env, dir) =>
        startSidecar(configFromEnv(env, dir), {
          logger: pino({ level: 'silent' }),
          intervals: { tipFloorMs: 300, balanceMs: 300, leadersMs: 1000, rpcSlotMs: 100, blockHeightMs: 200 },
        }),
    });
  }, 60_000);

  afterAll(async () => {
    await stack?.close();
  });

  test('a transaction signed with @solana/kit reaches finalized through the installed client', async () => {
    const latest = await stack.connection().getLatestBlockhash('confirmed');
    const out = await sh('node', ['kit-finalized.mjs'], project, {
      RELAY_URL: stack.sidecar.url,
      PAYER_SECRET: JSON.stringify([...stack.payer.secretKey]),
      BLOCKHASH: latest.blockhash,
      LAST_VALID_BLOCK_HEIGHT: String(latest.lastValidBlockHeight),
    });
    const { recipient, status } = JSON.parse(out) as { recipient: string; status: { state: string } };
    expect(status.state).toBe('finalized');
    expect(await stack.connection().getBalance(new PublicKey(recipient), 'finalized')).toBe(1_000_000);
  });
});
