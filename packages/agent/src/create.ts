import { RelayClient, type RelayClientLogger } from '@solrelay/client';
import { RelayAgent, type RelayAgentOptions } from './agent';
import { AnthropicDecisionModel, DEFAULT_AGENT_MODEL } from './anthropic-model';
import { SsePresence } from './presence';

/** Everything `createRelayAgent` needs: plain values (the app reads them from the environment). */
export interface CreateRelayAgentOptions extends Omit<
  RelayAgentOptions,
  'client' | 'presence' | 'model' | 'modelUnavailableReason'
> {
  /** The sidecar, e.g. `http://127.0.0.1:7777`. */
  relayUrl: string;
  /** `RELAY_API_TOKEN`. */
  token?: string;
  /** `ANTHROPIC_API_KEY`. */
  anthropicApiKey?: string;
  /** `ANTHROPIC_BASE_URL`. */
  anthropicBaseUrl?: string;
  /** `AGENT_MODEL`; default `claude-haiku-4-5`. */
  model?: string;
  clientLogger?: RelayClientLogger;
}

/** The agent wired to a real client, presence stream and (when configured) the Anthropic model. */
export interface CreatedRelayAgent {
  agent: RelayAgent;
  client: RelayClient;
  /** Stop the agent and close the client. */
  close(): void;
}

/** Whether cortex has a model: an API key or a base URL (a local endpoint such as the simnet's) is configured. */
export function cortexConfigured(options: { anthropicApiKey?: string; anthropicBaseUrl?: string }): boolean {
  return !!options.anthropicApiKey || !!options.anthropicBaseUrl;
}

/**
 * Builds the agent from plain configuration: a `RelayClient`, the presence stream registering `model` / provider,
 * and the Anthropic model when a key or base URL is given (otherwise cortex is unavailable and the agent says so
 * once at start). Registers as provider `none`, model `reflex-only` without a model.
 *
 * @example
 * const { agent, close } = createRelayAgent({ relayUrl: 'http://127.0.0.1:7777', log });
 * await agent.start();
 */
export function createRelayAgent(options: CreateRelayAgentOptions): CreatedRelayAgent {
  const {
    relayUrl,
    token,
    anthropicApiKey,
    anthropicBaseUrl,
    model: modelName,
    clientLogger,
    ...rest
  } = options;
  const client = new RelayClient({
    baseUrl: relayUrl,
    // In a fleet the agent decides for its own sidecar only: another host's transactions are that host's agent's.
    eventScope: 'host',
    ...(token ? { token } : {}),
    ...(clientLogger ? { logger: clientLogger } : {}),
  });
  const model = cortexConfigured(options)
    ? new AnthropicDecisionModel({
        // The SDK refuses to start without a key; a keyless local endpoint gets a placeholder it ignores.
        apiKey: anthropicApiKey || 'unset',
        ...(anthropicBaseUrl ? { baseURL: anthropicBaseUrl } : {}),
        model: modelName || DEFAULT_AGENT_MODEL,
      })
    : null;
  const presence = new SsePresence({
    baseUrl: relayUrl,
    ...(token ? { token } : {}),
    model: model?.model ?? 'reflex-only',
    provider: model?.provider ?? 'none',
    ...(rest.timers ? { timers: rest.timers } : {}),
  });
  const agent = new RelayAgent({
    ...rest,
    client,
    presence,
    model,
    modelUnavailableReason: 'neither ANTHROPIC_API_KEY nor ANTHROPIC_BASE_URL is set',
  });
  return {
    agent,
    client,
    close() {
      agent.stop();
      client.close();
    },
  };
}
