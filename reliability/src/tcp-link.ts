import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A host's network link to one server (its database), as a TCP forwarder on loopback that can be cut and healed
 * (issue #29's failure matrix: "one host's database link down"). Cut, it forwards nothing either way and closes
 * nothing, as a link that drops every packet: bytes wait (as TCP would retransmit them), a connection opened meanwhile
 * is accepted but its bytes wait too, and a side that closes meanwhile is not told to the other. Healed, what waited
 * flows, and a connection whose other side closed meanwhile ends (as the peer's reset would end it).
 */
export class LinkProxy {
  private readonly pairs = new Set<{ client: Socket; upstream: Socket }>();
  private down = false;

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }): Promise<LinkProxy> {
    let proxy: LinkProxy | null = null;
    const server = createServer((client) => proxy?.accept(client, target));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    proxy = new LinkProxy(server, (server.address() as { port: number }).port);
    return proxy;
  }

  get isDown(): boolean {
    return this.down;
  }

  /** Stop forwarding, both ways, on every connection (and on those opened while cut). */
  cut(): void {
    this.down = true;
    for (const { client, upstream } of this.pairs) {
      client.pause();
      upstream.pause();
    }
  }

  /** Forward again: what waited flows; a connection one side of which closed meanwhile ends. */
  heal(): void {
    this.down = false;
    for (const pair of [...this.pairs]) {
      const { client, upstream } = pair;
      if (client.destroyed || upstream.destroyed) {
        this.pairs.delete(pair);
        client.destroy();
        upstream.destroy();
        continue;
      }
      client.resume();
      upstream.resume();
    }
  }

  async close(): Promise<void> {
    for (const { client, upstream } of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, target: { host: string; port: number }): void {
    const upstream = connect(target.port, target.host);
    const pair = { client, upstream };
    this.pairs.add(pair);
    const end = () => {
      // While cut, a close is not told to the other side (no packet crosses); heal() ends the pair.
      if (this.down) return;
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) {
      socket.on('error', () => undefined);
      socket.on('close', end);
    }
    client.on('data', (chunk: Buffer) => upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    if (this.down) {
      client.pause();
      upstream.pause();
    }
  }
}
