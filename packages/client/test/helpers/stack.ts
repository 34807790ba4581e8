import { createServer } from 'node:net';
import { configFromEnv, startSidecar, type Sidecar } from '@solrelay/sidecar';
import { startStack, type Stack, type StackOptions } from '@solrelay/testkit';
import pino from 'pino';

/** A real simnet + the real sidecar, with the fast poll intervals the simnet's 60 ms slots need. */
export function startRelayStack(options: Omit<StackOptions<Sidecar>, 'start'> = {}): Promise<Stack<Sidecar>> {
  return startStack({
    ...options,
    start: (env, dir) =>
      startSidecar(configFromEnv(env, dir), {
        logger: pino({ level: process.env.RELAY_TEST_LOG ?? 'silent' }),
        intervals: { tipFloorMs: 300, balanceMs: 300, leadersMs: 1000, rpcSlotMs: 100, blockHeightMs: 200 },
      }),
  });
}

/** A loopback port that was free a moment ago, so a restarted sidecar comes back at the same URL. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}
