import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

// The built package, installed the way a consumer gets it (package.json + dist, nothing from the repository around
// it), must find its own geyser.proto from both the ESM and the CJS entry.

const packageDir = resolve(__dirname, '..');
let consumer: string;

beforeAll(() => {
  if (!existsSync(join(packageDir, 'dist', 'index.js'))) {
    execFileSync('pnpm', ['exec', 'tsup'], { cwd: packageDir, stdio: 'ignore' });
  }
  consumer = mkdtempSync(join(tmpdir(), 'simnet-consumer-'));
  const installed = join(consumer, 'node_modules', '@solrelay', 'simnet');
  mkdirSync(installed, { recursive: true });
  cpSync(join(packageDir, 'package.json'), join(installed, 'package.json'));
  cpSync(join(packageDir, 'dist'), join(installed, 'dist'), { recursive: true });
  // Dependencies only: pnpm's per-package node_modules holds symlinks to them and nothing of the repository.
  symlinkSync(join(packageDir, 'node_modules'), join(installed, 'node_modules'), 'dir');
}, 120_000);

afterAll(() => {
  if (consumer) rmSync(consumer, { recursive: true, force: true });
});

const script = (load: string) => `${load}
const sim = await startSimnet({ clock: 'manual', rateLimit: false });
sim.cluster.advance(2);
const proto = findGeyserProto();
await sim.stop();
console.log(JSON.stringify({ proto, slot: sim.cluster.slot, geyser: sim.endpoints.geyserEndpoint }));`;

function run(file: string, source: string): { proto: string; slot: number; geyser: string } {
  writeFileSync(join(consumer, file), source);
  const out = execFileSync(process.execPath, [file], { cwd: consumer, encoding: 'utf8', timeout: 60_000 });
  return JSON.parse(out.trim().split('\n').pop() as string);
}

describe('the built package outside the repository', () => {
  it('has no protos/ above the consumer directory', () => {
    let dir = consumer;
    for (;;) {
      expect(existsSync(join(dir, 'protos', 'geyser.proto'))).toBe(false);
      const parent = resolve(dir, '..');
      if (parent === dir) break;
      dir = parent;
    }
  });

  it.each([
    ['ESM', 'esm.mjs', `import { startSimnet, findGeyserProto } from '@solrelay/simnet';`],
    [
      'CJS',
      'cjs.cjs',
      `const { startSimnet, findGeyserProto } = require('@solrelay/simnet');\n(async () => {`,
    ],
  ])('%s entry starts a simnet with the proto shipped in dist', (_format, file, load) => {
    const body = file.endsWith('.cjs') ? `${script(load)}\n})();` : script(load);
    const result = run(file, body);
    expect(result.proto).toBe(
      join(consumer, 'node_modules', '@solrelay', 'simnet', 'dist', 'protos', 'geyser.proto'),
    );
    expect(result.slot).toBe(2);
    expect(result.geyser).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });
});
