// A second `relay start/up` on a port already in use (the common "another relay is running on 7777") is an expected
// failure: exit 1, a one-line message naming the port and a hint, not "unexpected error (a bug)" with a stack trace.
import { createServer, type Server } from 'node:net';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { baseEnv, freePort, runRelay } from '../helpers/relay-bin';

let blocker: Server;
let port: number;

beforeAll(async () => {
  port = await freePort();
  blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(port, '127.0.0.1', () => resolve()));
});

afterAll(async () => {
  await new Promise<void>((resolve) => blocker.close(() => resolve()));
});

test('relay start --sim on a port in use: exit 1 naming the port with a hint, not a bug report', async () => {
  const cwd = await mkdtemp(join(tmpdir(), 'relay-cli-port-in-use-'));
  const run = await runRelay(['start', '--sim', '--no-demo', '--slot-ms', '100', '--no-rate-limit'], {
    cwd,
    env: baseEnv({ API_PORT: String(port) }),
    timeoutMs: 30_000,
  });
  expect(run.code).toBe(1);
  expect(run.stderr).not.toMatch(/unexpected error|a bug/);
  expect(run.stderr).not.toMatch(/^\s+at /m); // no stack trace
  expect(run.stderr).toContain(String(port));
  expect(run.stderr).toMatch(/in use/i);
  expect(run.stderr).toMatch(/hint:/);
}, 35_000);
