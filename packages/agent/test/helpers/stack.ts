import { configFromEnv, startSidecar, type Sidecar } from '@solrelay/sidecar';
import { startStack, type Stack, type StackOptions } from '@solrelay/testkit';
import pino from 'pino';
import {
  createRelayAgent,
  type CreatedRelayAgent,
  type CreateRelayAgentOptions,
  type SubmitRecord,
} from '../../src';

/**
 * A real simnet + the real sidecar, with the fast poll intervals the simnet's 60 ms slots need. The sidecar's own
 * fallback reflex is off (RELAY_AGENT_GRACE_S=0), so every decision in these tests is the agent's.
 */
export function startRelayStack(options: Omit<StackOptions<Sidecar>, 'start'> = {}): Promise<Stack<Sidecar>> {
  return startStack({
    ...options,
    env: { RELAY_AGENT_GRACE_S: '0', ...options.env },
    start: (env, dir) =>
      startSidecar(configFromEnv(env, dir), {
        logger: pino({ level: process.env.RELAY_TEST_LOG ?? 'silent' }),
        intervals: { tipFloorMs: 300, balanceMs: 300, leadersMs: 1000, rpcSlotMs: 100, blockHeightMs: 200 },
      }),
  });
}

/** An agent wired to the stack's sidecar and the simnet's Messages endpoint, recording its lines and submits. */
export interface TestAgent extends CreatedRelayAgent {
  lines: string[];
  errors: string[];
  submits: SubmitRecord[];
}

export function agentFor(
  stack: Stack<Sidecar>,
  options: Partial<CreateRelayAgentOptions> & { withModel?: boolean } = {},
): TestAgent {
  const { withModel = true, ...rest } = options;
  const lines: string[] = [];
  const errors: string[] = [];
  const submits: SubmitRecord[] = [];
  const created = createRelayAgent({
    relayUrl: stack.sidecar.url,
    ...(withModel
      ? { anthropicApiKey: stack.env.ANTHROPIC_API_KEY, anthropicBaseUrl: stack.env.ANTHROPIC_BASE_URL }
      : {}),
    log: {
      line: (text) => {
        lines.push(text);
        if (process.env.AGENT_TEST_LOG) process.stdout.write(`[agent] ${text}\n`);
      },
      error: (text) => {
        errors.push(text);
        if (process.env.AGENT_TEST_LOG) process.stdout.write(`[agent!] ${text}\n`);
      },
    },
    onSubmit: (record) => submits.push(record),
    ...rest,
  });
  return { ...created, lines, errors, submits };
}

export { freePort } from '@solrelay/testkit';
