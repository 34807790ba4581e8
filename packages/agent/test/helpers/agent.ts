import { configFromEnv, startSidecar, type Sidecar } from '@solrelay/sidecar';
import { startInProcessStack, type Stack } from '@solrelay/testkit';
import {
  createRelayAgent,
  type CreatedRelayAgent,
  type CreateRelayAgentOptions,
  type SubmitRecord,
} from '../../src';

/**
 * testkit's stack with the built sidecar in this process and its own fallback reflex off (RELAY_AGENT_GRACE_S=0), so
 * every decision in these tests is the agent's; `env` adds to the sidecar's environment.
 */
export function startAgentStack(env: Record<string, string> = {}): Promise<Stack<Sidecar>> {
  return startInProcessStack({ configFromEnv, startSidecar }, { env: { RELAY_AGENT_GRACE_S: '0', ...env } });
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
