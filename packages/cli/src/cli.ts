import yargs, { type Argv } from 'yargs';
import { EXIT_CODES, ExitError, usageError } from './errors';
import type { CliContext, CommandResult } from './output';
import type { SimFlags } from './runtime/simulated-cluster';

/**
 * argv -> one command with its options. Parsing runs no command: it picks a runner, and the entry point runs it,
 * renders its result and exits. Each runner imports its command module lazily, so `relay status` does not load
 * the sidecar, the simulated cluster or web3.js.
 */

export type CommandRunner = (ctx: CliContext) => Promise<CommandResult>;

export type ParsedArgs =
  | { kind: 'run'; json: boolean; run: CommandRunner }
  /** `--help` / `--version` (or a bare `relay policy`): print `output` and exit 0. */
  | { kind: 'print'; output: string };

/** `relay up --hosts N`: at most this many hosts (127.0.0.2 .. 127.0.0.9 as their engine addresses). */
const MAX_HOSTS = 8;

const SIM_DESCRIPTION =
  'run on a simulated cluster in this process (no env needed; an ephemeral funded keypair)';

function wholeNumber(flag: string, min: number, max = Number.MAX_SAFE_INTEGER) {
  return (raw: unknown): number | undefined => {
    if (raw === undefined) return undefined;
    const text = String(Array.isArray(raw) ? raw[raw.length - 1] : raw).replace(/_/g, '');
    if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
      throw usageError(
        `${flag} needs a whole number from ${min.toLocaleString('en-US')}${max < Number.MAX_SAFE_INTEGER ? ` to ${max.toLocaleString('en-US')}` : ''}, got "${String(raw)}"`,
      );
    }
    return Number(text);
  };
}

function jsonOption<T>(y: Argv<T>) {
  return y.option('json', {
    type: 'boolean',
    default: false,
    describe: 'print the JSON document only (logs go to stderr)',
  });
}

function databaseUrlOption<T>(y: Argv<T>) {
  return y.option('database-url', {
    type: 'string',
    describe: 'postgres://user:password@host:5432/database (default RELAY_DATABASE_URL; a flag shows in ps)',
  });
}

function simOptions<T>(y: Argv<T>) {
  return y
    .option('sim', { type: 'boolean', default: false, describe: SIM_DESCRIPTION })
    .option('seed', {
      type: 'string',
      describe: 'with --sim: seed of every random choice (default 1)',
      coerce: wholeNumber('--seed', 0),
    })
    .option('slot-ms', {
      type: 'string',
      describe: 'with --sim: slot period in ms (default 400)',
      coerce: wholeNumber('--slot-ms', 50, 60_000),
    })
    .option('rate-limit', {
      type: 'boolean',
      default: true,
      describe: "with --sim: the block engine's 1 req/s limit (--no-rate-limit turns it off)",
    });
}

interface SimArgs {
  sim: boolean;
  seed: number | undefined;
  'slot-ms': number | undefined;
  'rate-limit': boolean;
  /** Only on commands with demo traffic (up, start). */
  demo?: boolean;
}

function simFlags(args: SimArgs, command: string): SimFlags | null {
  if (!args.sim) {
    // --no-demo is checked like the others: without --sim there is no demo traffic to turn off.
    if (
      args.seed !== undefined ||
      args['slot-ms'] !== undefined ||
      !args['rate-limit'] ||
      args.demo === false
    ) {
      const flags =
        args.demo === undefined
          ? '--seed, --slot-ms and --no-rate-limit'
          : '--seed, --slot-ms, --no-rate-limit and --no-demo';
      throw usageError(`relay ${command}: ${flags} only apply with --sim`);
    }
    return null;
  }
  return { seed: args.seed, slotMs: args['slot-ms'], rateLimit: args['rate-limit'] };
}

export function buildParser(select: (json: boolean, run: CommandRunner) => void): Argv {
  const run = (json: boolean, runner: CommandRunner) => select(json, runner);
  return yargs()
    .scriptName('relay')
    .usage('$0 <command> [options]\n\nrelay: a local Solana transaction sidecar.')
    .strict()
    .demandCommand(1, 'Name a command.')
    .recommendCommands()
    .help()
    .alias('h', 'help')
    .version()
    .wrap(Math.min(110, process.stdout.columns || 110))
    .command(
      'up',
      'start the sidecar and the agent together; agent lines are prefixed [ AGENT ]. With --hosts N, a local fleet: N sidecars on one PostgreSQL, an agent beside each (`relay up --sim --hosts 3`)',
      (y) =>
        simOptions(y)
          .option('demo', {
            type: 'boolean',
            default: true,
            describe: 'with --sim: demo traffic, a self-transfer every 2 s (--no-demo turns it off)',
          })
          .option('hosts', {
            type: 'string',
            describe: `a fleet of N sidecar processes (1 to ${MAX_HOSTS}) on one PostgreSQL, each with its own RELAY_HOST_ID (host-k), API port (API_PORT + k - 1), data directory and, with --sim, engine source address (127.0.0.<k+1>), an agent beside each. With --sim: a local PostgreSQL from the machine's packages, unless RELAY_DATABASE_URL is set (then it must hold no host session or transaction yet); without --sim, RELAY_DATABASE_URL is needed`,
            coerce: wholeNumber('--hosts', 1, MAX_HOSTS),
          })
          .option('pg-fsync', {
            type: 'boolean',
            default: true,
            describe:
              'with --hosts: fsync on the local PostgreSQL, as relay expects in production (--no-pg-fsync: faster; a crash of the machine may lose its data)',
          }),
      (args) => {
        const sim = simFlags(args, 'up');
        if (args.hosts === undefined && !args['pg-fsync'])
          throw usageError('relay up: --no-pg-fsync only applies with --hosts');
        run(false, async (ctx) =>
          (await import('./commands/up')).up(ctx, {
            sim,
            demo: args.demo,
            hosts: args.hosts,
            pgFsync: args['pg-fsync'],
          }),
        );
      },
    )
    .command(
      'start',
      'start the sidecar only (the agent runs separately)',
      (y) =>
        simOptions(y)
          .option('bypass', {
            type: 'boolean',
            default: false,
            describe: 'no agent: submit every enqueued transaction at once at a fixed tip',
          })
          .option('tip', {
            type: 'string',
            describe: 'with --bypass: the fixed tip in lamports (default 10000)',
            coerce: wholeNumber('--tip', 1_000),
          })
          .option('demo', {
            type: 'boolean',
            default: true,
            describe: 'with --sim: demo traffic (--no-demo turns it off)',
          }),
      (args) => {
        if (args.tip !== undefined && !args.bypass) throw usageError('--tip is only used with --bypass');
        const sim = simFlags(args, 'start');
        run(false, async (ctx) =>
          (await import('./commands/start')).start(ctx, {
            bypass: args.bypass,
            tip: args.tip,
            sim,
            demo: args.demo,
          }),
        );
      },
    )
    .command('agent', 'run the agent: npm run dev in AGENT_DIR', {}, () => {
      run(false, async (ctx) => (await import('./commands/agent')).agent(ctx));
    })
    .command('web', 'run the dashboard: npm run dev in WEB_DIR', {}, () => {
      run(false, async (ctx) => (await import('./commands/web')).web(ctx));
    })
    .command(
      'smoke',
      'stream smoke test: wait for a bundle-engine leader window, send one bundle, follow it to finalized',
      (y) =>
        jsonOption(simOptions(y))
          .option('tip', {
            type: 'string',
            describe: "tip in lamports (default: the tip floor's p75)",
            coerce: wholeNumber('--tip', 1_000),
          })
          .option('attempts', {
            type: 'string',
            describe: 'bundles to try if a window passes without landing (default 3)',
            coerce: wholeNumber('--attempts', 1, 20),
          })
          .option('timeout', {
            type: 'string',
            describe: 'give up after this many seconds (default 120)',
            coerce: wholeNumber('--timeout', 1),
          }),
      (args) => {
        const sim = simFlags(args, 'smoke');
        run(args.json, async (ctx) =>
          (await import('./commands/smoke')).smoke(ctx, {
            sim,
            tip: args.tip,
            attempts: args.attempts ?? 3,
            timeoutS: args.timeout ?? 120,
            json: args.json,
          }),
        );
      },
    )
    .command(
      'sim',
      'run the simulated cluster alone; prints its endpoints and env lines',
      (y) =>
        jsonOption(y)
          .option('seed', {
            type: 'string',
            describe: 'seed of every random choice (default 1)',
            coerce: wholeNumber('--seed', 0),
          })
          .option('slot-ms', {
            type: 'string',
            describe: 'slot period in ms (default 400)',
            coerce: wholeNumber('--slot-ms', 50, 60_000),
          })
          .option('rate-limit', {
            type: 'boolean',
            default: true,
            describe: "the block engine's 1 req/s limit (--no-rate-limit turns it off)",
          }),
      (args) => {
        const flags: SimFlags = { seed: args.seed, slotMs: args['slot-ms'], rateLimit: args['rate-limit'] };
        run(args.json, async (ctx) => (await import('./commands/sim')).sim(ctx, { flags, json: args.json }));
      },
    )
    .command('status', 'summary of the running sidecar', jsonOption, (args) => {
      run(args.json, async (ctx) => (await import('./commands/status')).status(ctx));
    })
    .command('tip', 'the tip floor (lamports)', jsonOption, (args) => {
      run(args.json, async (ctx) => (await import('./commands/tip')).tip(ctx));
    })
    .command('queue', 'transactions not yet final, each with its state', jsonOption, (args) => {
      run(args.json, async (ctx) => (await import('./commands/queue')).queue(ctx));
    })
    .command(
      'lifecycle',
      'recent bundle lifecycle entries, most recent last',
      (y) =>
        jsonOption(y).option('last', {
          alias: 'l',
          type: 'string',
          describe: 'how many entries (default 10)',
          coerce: wholeNumber('--last', 1, 10_000),
        }),
      (args) => {
        run(args.json, async (ctx) =>
          (await import('./commands/lifecycle')).lifecycle(ctx, { last: args.last ?? 10 }),
        );
      },
    )
    .command(
      'bundle <id>',
      'the full lifecycle entry of one bundle',
      (y) =>
        jsonOption(y).positional('id', {
          type: 'string',
          demandOption: true,
          describe: 'bundle id (64 hex characters)',
        }),
      (args) => {
        // Checked here, not only by the sidecar: an id like `.` or `..` would otherwise change the URL's path.
        if (!/^[0-9a-fA-F]{64}$/.test(args.id)) {
          throw usageError(`a bundle id is 64 hex characters, got "${args.id}"`);
        }
        const id = args.id.toLowerCase();
        run(args.json, async (ctx) => (await import('./commands/bundle')).bundle(ctx, { id }));
      },
    )
    .command(
      'db',
      'PostgreSQL schema at RELAY_DATABASE_URL: migrate, status (the sidecar does not run on it yet)',
      (y) =>
        y
          .command(
            'migrate',
            'apply pending schema migrations (one transaction each, under an advisory lock: safe from several hosts)',
            (z) => databaseUrlOption(jsonOption(z)),
            (args) => {
              run(args.json, async (ctx) =>
                (await import('./commands/db')).dbMigrate(ctx, { databaseUrl: args['database-url'] }),
              );
            },
          )
          .command(
            'status',
            "schema version, this relay's version and pending migrations; exit 1 unless up to date",
            (z) => databaseUrlOption(jsonOption(z)),
            (args) => {
              run(args.json, async (ctx) =>
                (await import('./commands/db')).dbStatus(ctx, { databaseUrl: args['database-url'] }),
              );
            },
          )
          .demandCommand(1, 'Name a db command: migrate or status.'),
    )
    .command(
      'policy',
      'read and edit the policy file (RELAY_POLICY_FILE, default ./relay.policy.json)',
      (y) =>
        y
          .command('show', 'every key: value, default and override status', jsonOption, (args) => {
            run(args.json, async (ctx) => (await import('./commands/policy')).policyShow(ctx));
          })
          .command(
            'set <key> <value>',
            'set one key (validated; lamports, slots and counts as plain integers)',
            (z) =>
              jsonOption(z)
                .positional('key', { type: 'string', demandOption: true })
                .positional('value', { type: 'string', demandOption: true }),
            (args) => {
              run(args.json, async (ctx) =>
                (await import('./commands/policy')).policySet(ctx, {
                  key: args.key,
                  value: String(args.value),
                }),
              );
            },
          )
          .command('validate', 'check the file; exit 1 listing every contradiction', jsonOption, (args) => {
            run(args.json, async (ctx) => (await import('./commands/policy')).policyValidate(ctx));
          })
          .command(
            'reset [key]',
            'reset one key, or every key, to its built-in default',
            (z) => jsonOption(z).positional('key', { type: 'string' }),
            (args) => {
              run(args.json, async (ctx) =>
                (await import('./commands/policy')).policyReset(
                  ctx,
                  args.key === undefined ? {} : { key: args.key },
                ),
              );
            },
          )
          .command('clear', 'delete the policy file (every key back to its default)', jsonOption, (args) => {
            run(args.json, async (ctx) => (await import('./commands/policy')).policyClear(ctx));
          })
          .command(
            'export',
            'save the resolved policy (every key) to a file',
            (z) =>
              jsonOption(z).option('path', { type: 'string', demandOption: true, describe: 'file to write' }),
            (args) => {
              run(args.json, async (ctx) =>
                (await import('./commands/policy')).policyExport(ctx, { path: args.path }),
              );
            },
          )
          .command(
            'import <file>',
            'apply a saved policy (validated first; nothing changes if it is invalid)',
            (z) => jsonOption(z).positional('file', { type: 'string', demandOption: true }),
            (args) => {
              run(args.json, async (ctx) =>
                (await import('./commands/policy')).policyImport(ctx, { file: args.file }),
              );
            },
          )
          .demandCommand(1, 'Name a policy command: show, set, validate, reset, clear, export or import.'),
    );
}

const LEADING_FLAGS = new Set(['-h', '--help', '--version']);

/**
 * Options belong to a command. One written before the command (`relay --json status`, `relay policy --json show`)
 * would otherwise take the command's name as its value and leave yargs to say "Name a command.", which names the
 * wrong problem; say which option is misplaced instead.
 */
function misplacedOption(argv: string[]): void {
  const group = argv[0] === 'policy' || argv[0] === 'db' ? argv[0] : null;
  const token = argv[group ? 1 : 0];
  if (token === undefined || !token.startsWith('-') || LEADING_FLAGS.has(token)) return;
  const where = group ? `the ${group} command` : 'the command';
  throw usageError(
    `${token} before ${where}: options go after it (relay ${group ? `${group} <command>` : '<command>'} [options])`,
  );
}

/** Parses argv into one command to run, or text to print (help, version). Usage errors throw ExitError(2). */
export async function parseArgs(argv: string[]): Promise<ParsedArgs> {
  misplacedOption(argv);
  let selected: { json: boolean; run: CommandRunner } | null = null;
  const parser = buildParser((json, runner) => {
    selected = { json, run: runner };
  })
    .exitProcess(false)
    .fail((message, error) => {
      if (error && (error as { name?: string }).name === 'ExitError') throw error;
      throw usageError(message ?? error?.message ?? 'invalid command line');
    });
  const output = await new Promise<string>((resolve, reject) => {
    try {
      void parser.parse(argv, {}, (error, _args, text) => (error ? reject(error) : resolve(text)));
    } catch (error) {
      reject(error);
    }
  });
  const chosen = selected as { json: boolean; run: CommandRunner } | null;
  if (chosen) return { kind: 'run', ...chosen };
  if (output) return { kind: 'print', output };
  throw new ExitError(EXIT_CODES.usage, 'Name a command.', { hint: 'Run `relay --help` for usage.' });
}
