#!/usr/bin/env node
import { endpointLines, formatEnvLines, startSimnet, type SimnetOptions } from './simnet';

const USAGE = `solrelay-simnet: a Solana + Jito + Yellowstone cluster on loopback ports

Options:
  --seed N              seed of every random choice (default 1)
  --slot-ms N           slot period in ms (default 400)
  --consensus MODE      towerbft (default), alpenglow or migration
  --migration-slot N    migration mode: the boundary slot (default 64)
  --port-base N         consecutive ports: rpc, rpc ws, geyser, then engine http + grpc per region (default: free)
  --rpc-port N          Solana JSON-RPC port (its WebSocket is N + 1)
  --geyser-port N       Yellowstone gRPC port
  --engine-port N       first region's block engine HTTP port (JSON-RPC, tip floor, Anthropic Messages, /admin)
  --engine-grpc-port N  first region's block engine gRPC port
  --regions N|a,b,...   regional block engines: a count of Jito's eight (amsterdam first) or names (default 8)
  --tls                 serve the engine gRPC over TLS with the committed TEST-ONLY certificate
  --x-token T           require this x-token on the geyser stream
  --no-rate-limit       turn the block engine's 1 req/s per-IP limit off
  -h, --help            this text

Prints the endpoints as # comments, then NAME=value env lines for a sidecar; Ctrl-C stops it.`;

class UsageError extends Error {}

function parseArgs(argv: string[]): SimnetOptions | null {
  const options: SimnetOptions = {};
  const ports: NonNullable<SimnetOptions['ports']> = {};
  const integer = (flag: string, value: string | undefined, min = 0): number => {
    const n = Number(value);
    if (value === undefined || !Number.isInteger(n) || n < min)
      throw new UsageError(`${flag} needs an integer >= ${min}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const [flag, inline] =
      arg.startsWith('--') && arg.includes('=')
        ? (arg.split(/=(.*)/s) as [string, string])
        : [arg, undefined];
    const value = () => inline ?? argv[++i];
    switch (flag) {
      case '-h':
      case '--help':
        return null;
      case '--seed':
        options.seed = integer(flag, value());
        break;
      case '--slot-ms':
        options.slotMs = integer(flag, value(), 1);
        break;
      case '--consensus': {
        const mode = value();
        if (mode !== 'towerbft' && mode !== 'alpenglow' && mode !== 'migration')
          throw new UsageError('--consensus needs towerbft, alpenglow or migration');
        options.consensus = mode;
        break;
      }
      case '--migration-slot':
        options.migration = { ...options.migration, boundarySlot: integer(flag, value(), 1) };
        break;
      case '--port-base':
        options.portBase = integer(flag, value(), 1);
        break;
      case '--rpc-port':
        ports.rpc = integer(flag, value());
        break;
      case '--geyser-port':
        ports.geyser = integer(flag, value());
        break;
      case '--engine-port':
        ports.engine = integer(flag, value());
        break;
      case '--engine-grpc-port':
        ports.engineGrpc = integer(flag, value());
        break;
      case '--regions': {
        const v = value();
        if (!v) throw new UsageError('--regions needs a count or comma-separated names');
        options.regions = /^\d+$/.test(v) ? Number(v) : v.split(',').map((name) => name.trim());
        break;
      }
      case '--tls':
        options.tls = true;
        break;
      case '--x-token': {
        const token = value();
        if (!token) throw new UsageError('--x-token needs a value');
        options.xToken = token;
        break;
      }
      case '--no-rate-limit':
        options.rateLimit = false;
        break;
      default:
        throw new UsageError(`unknown option ${arg}`);
    }
  }
  if (Object.keys(ports).length > 0) options.ports = ports;
  return options;
}

async function main(): Promise<void> {
  let options: SimnetOptions | null;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${USAGE}\n`);
    process.exit(2);
  }
  if (!options) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const simnet = await startSimnet(options);
  const lines = [
    `# solrelay simnet (seed ${options.seed ?? 1}, ${options.slotMs ?? 400} ms slots)`,
    ...endpointLines(simnet.endpoints),
    ...formatEnvLines(simnet.env()),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`# ${signal}: stopping\n`);
    void simnet.stop().then(() => process.exit(0));
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

main().catch((error: unknown) => {
  process.stderr.write(`solrelay-simnet: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
