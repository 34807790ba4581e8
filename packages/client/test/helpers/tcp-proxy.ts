import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A loopback TCP proxy in front of the sidecar, so a test can cut the client's real connections (`dropAll`) and
 * refuse new ones for a while (`refuse`), which is what a network drop looks like to the client.
 */
export class TcpProxy {
  /** Connections accepted so far (including refused ones). */
  accepted = 0;
  private refusing = false;
  private readonly pairs = new Set<[Socket, Socket]>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(targetPort: number): Promise<TcpProxy> {
    let proxy: TcpProxy | null = null;
    const server = createServer((client) => {
      const self = proxy as TcpProxy;
      self.accepted++;
      if (self.refusing) {
        client.destroy();
        return;
      }
      const upstream = createConnection({ host: '127.0.0.1', port: targetPort });
      const pair: [Socket, Socket] = [client, upstream];
      self.pairs.add(pair);
      const teardown = () => {
        client.destroy();
        upstream.destroy();
        self.pairs.delete(pair);
      };
      client.on('error', teardown).on('close', teardown);
      upstream.on('error', teardown).on('close', teardown);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (typeof address !== 'object' || !address) throw new Error('proxy has no address');
    proxy = new TcpProxy(server, address.port);
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get openConnections(): number {
    return this.pairs.size;
  }

  /** Cut every open connection at once. */
  dropAll(): void {
    for (const [client, upstream] of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
  }

  /** While true, new connections are accepted and closed at once. */
  refuse(on: boolean): void {
    this.refusing = on;
  }

  async close(): Promise<void> {
    this.dropAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
