import { createServer } from 'node:net';

/**
 * A loopback port that is free now and that nothing else on the machine will be handed meanwhile (so a sidecar
 * started a little later, or restarted, can listen there): drawn below Linux's ephemeral range (32768-60999), where
 * neither `listen(0)` nor outgoing connections get ports, and checked free. A port the OS picked (the old way) could
 * be given to one of the simulated cluster's many servers or streams in between, and the sidecar then failed to
 * start ("already in use").
 */
export async function freePort(): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const candidate = 20_000 + Math.floor(Math.random() * 12_000);
    if (await canListen(candidate)) return candidate;
  }
  throw new Error('no free loopback port found below the ephemeral range');
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}
