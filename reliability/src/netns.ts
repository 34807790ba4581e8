import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

/**
 * Hosts of their own on this machine (issue #29: "each sidecar its own address with Linux network namespaces on a
 * bridge inside the machine"): a bridge in this namespace holding the gateway address, and per host a network
 * namespace joined to it by a veth pair, with an address of its own on the bridge's /24. Servers this process starts
 * (the simulated cluster, PostgreSQL) listen on the gateway address; a process started `inside(i)` reaches them from
 * host i's address, so the block engine meters it per address and the database sees its own peer. `cut(i)` takes
 * host i's veth down: every link it has (database, RPC, stream, engine) drops packets until `heal(i)`; nothing is
 * reset, as in a real partition. Nothing leaves the machine.
 *
 * Needs root and iproute2 (Debian's `iproute2`); `create` says so plainly when either is missing. Everything it made
 * is removed by `destroy`, and on this process's exit or a SIGINT/SIGTERM if a test never got there.
 */
export class NetLab {
  private destroyed = false;
  private readonly onSignal = (signal: NodeJS.Signals) => {
    this.destroy();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  private readonly onExit = () => this.destroy();

  private constructor(
    /** The names' common prefix (`rly` and 4 hex digits): bridge `<prefix>br`, namespaces `<prefix>-h<i>`. */
    readonly prefix: string,
    /** The /24's first three octets, e.g. `10.231.57`. */
    private readonly net: string,
    readonly hosts: number,
  ) {}

  /** The bridge's address in this namespace: where the servers the hosts reach listen. */
  get gateway(): string {
    return `${this.net}.1`;
  }

  /** Host i's own address (0-based). */
  address(i: number): string {
    return `${this.net}.${i + 2}`;
  }

  /** Host i's namespace. */
  namespace(i: number): string {
    return `${this.prefix}-h${i}`;
  }

  /** The command line that runs `argv` inside host i's namespace (`ip netns exec` execs it: the pid is its own). */
  inside(i: number, argv: readonly string[]): string[] {
    return ['ip', 'netns', 'exec', this.namespace(i), ...argv];
  }

  /** Every link of host i down: its veth on the bridge side (packets dropped both ways, no reset). */
  cut(i: number): void {
    ip('link', 'set', this.veth(i), 'down');
  }

  heal(i: number): void {
    ip('link', 'set', this.veth(i), 'up');
  }

  static create(hosts: number): NetLab {
    if (process.getuid?.() !== 0)
      throw new Error('network namespaces for the hosts need root (ip netns add); run the test as root');
    try {
      execFileSync('ip', ['-V'], { stdio: 'ignore' });
    } catch {
      throw new Error('network namespaces for the hosts need iproute2 (Debian/Ubuntu package "iproute2")');
    }
    const lab = new NetLab(`rly${randomBytes(2).toString('hex')}`, freeSubnet(), hosts);
    process.once('exit', lab.onExit);
    process.once('SIGINT', lab.onSignal);
    process.once('SIGTERM', lab.onSignal);
    try {
      ip('link', 'add', lab.bridge, 'type', 'bridge');
      ip('addr', 'add', `${lab.gateway}/24`, 'dev', lab.bridge);
      ip('link', 'set', lab.bridge, 'up');
      for (let i = 0; i < hosts; i++) {
        const ns = lab.namespace(i);
        ip('netns', 'add', ns);
        ip('link', 'add', lab.veth(i), 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
        ip('link', 'set', lab.veth(i), 'master', lab.bridge);
        ip('link', 'set', lab.veth(i), 'up');
        ip('-n', ns, 'addr', 'add', `${lab.address(i)}/24`, 'dev', 'eth0');
        ip('-n', ns, 'link', 'set', 'eth0', 'up');
        ip('-n', ns, 'link', 'set', 'lo', 'up');
      }
    } catch (error) {
      lab.destroy();
      throw error;
    }
    return lab;
  }

  /** Remove the namespaces (their veth pairs go with them) and the bridge; safe to call twice. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    process.off('exit', this.onExit);
    process.off('SIGINT', this.onSignal);
    process.off('SIGTERM', this.onSignal);
    for (let i = 0; i < this.hosts; i++) {
      // `ip netns del` only removes the name: a process still inside (a host a failed test never stopped) would keep
      // the namespace, its veth and itself alive. Killed first.
      for (const pid of pidsIn(this.namespace(i))) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
      quietly('link', 'del', this.veth(i));
      quietly('netns', 'del', this.namespace(i));
    }
    quietly('link', 'del', this.bridge);
    // A connection this process's servers still hold to a host that is gone: one whose peer vanished while its link
    // was cut holds unacknowledged data (a stream's updates) and retransmits it for up to ~15 minutes (tcp_retries2)
    // into a namespace that no longer exists, keeping the process alive. Killed here (SOCK_DESTROY, `ss -K`).
    try {
      execFileSync('ss', ['-K', 'dst', `${this.net}.0/24`], { stdio: 'ignore' });
    } catch {
      // none left, or the kernel cannot destroy sockets: the servers' own close is all there is
    }
  }

  private get bridge(): string {
    return `${this.prefix}br`;
  }

  private veth(i: number): string {
    return `${this.prefix}v${i}`;
  }
}

function ip(...args: string[]): void {
  try {
    execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim() ?? '';
    throw new Error(`ip ${args.join(' ')} failed: ${stderr || (error as Error).message}`, { cause: error });
  }
}

/** The processes inside a namespace (none when it is gone). */
function pidsIn(namespace: string): number[] {
  try {
    return execFileSync('ip', ['netns', 'pids', namespace], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    })
      .split('\n')
      .map((line) => Number(line.trim()))
      .filter((pid) => Number.isInteger(pid) && pid > 0);
  } catch {
    return [];
  }
}

function quietly(...args: string[]): void {
  try {
    execFileSync('ip', args, { stdio: 'ignore' });
  } catch {
    // already gone
  }
}

/** A 10.231.x.0/24 no route of this machine covers (x drawn at random, a few tries). */
function freeSubnet(): string {
  const routes = execFileSync('ip', ['-4', 'route', 'show'], { encoding: 'utf8' });
  for (let tries = 0; tries < 50; tries++) {
    const net = `10.231.${1 + (randomBytes(1).readUInt8(0) % 250)}`;
    if (!routes.includes(`${net}.`)) return net;
  }
  throw new Error('no free 10.231.x.0/24 for the hosts’ bridge');
}
