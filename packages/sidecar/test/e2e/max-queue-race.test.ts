import { post, type Stack } from '@solrelay/testkit';
import type { Sidecar } from '../../src/service';
import { startRelayStack } from '../helpers/relay-stack';

/** DESIGN §5 `max-queue`: enqueue refused (429) at this many non-terminal transactions, whatever the concurrency. */
let stack: Stack<Sidecar>;

beforeAll(async () => {
  stack = await startRelayStack({ env: { RELAY_AGENT_GRACE_S: '0' }, policy: { 'max-queue': 2 } });
}, 30_000);

afterAll(async () => {
  await stack?.close();
});

test('concurrent enqueues never push the queue past max-queue', async () => {
  const { url } = stack.sidecar;
  const bodies = Array.from({ length: 8 }, (_, i) => ({ transaction: stack.transfer(100 + i) }));
  const answers = await Promise.all(bodies.map((b) => post(url, '/tx/enqueue', b)));
  const accepted = answers.filter((a) => a.status === 202).length;
  const refused = answers.filter((a) => a.status === 429);
  expect(accepted).toBe(2);
  expect(refused).toHaveLength(6);
  for (const r of refused) expect(r.headers.get('retry-after')).toBeTruthy();
  expect((await stack.sidecar.relay.counts()).active).toBeLessThanOrEqual(2);
}, 30_000);
