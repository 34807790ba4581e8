import Anthropic, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
  AuthenticationError,
  InternalServerError,
  OverloadedError,
  PermissionDeniedError,
  RateLimitError,
} from '@anthropic-ai/sdk';
import type { DecisionModel, ModelFailureReason, ModelResult, ModelUsage } from './ports';
import type { DecisionSnapshot } from './snapshot';

/** The one tool the model answers with. */
export const DECISION_TOOL_NAME = 'decide_submission';

/** The model used when `AGENT_MODEL` is not set. */
export const DEFAULT_AGENT_MODEL = 'claude-haiku-4-5';

/**
 * The static part of every request (tools → system come before the per-transaction message, so this prefix is
 * what the prompt cache holds). It states the rules; the numbers come in the snapshot.
 */
export const DECISION_SYSTEM_PROMPT = [
  'You decide when and with what tip a queued Solana transaction is submitted as a Jito bundle by relay.',
  'The user message is a JSON snapshot: the transaction (tx_id, priority, tip_mode, retries, expires_at_slot,',
  "max_tip), the bundle's requested compute units (compute_units: its transactions plus relay's tip transaction)",
  'and the contention of the accounts it writes (contention.class contended, uncontended or unknown; unknown is',
  'priced as contended; write_price_micro_lamports is their recent price of write access per CU), the tip floor in',
  'lamports (p25, p50, p75, p95, p99, ema; stale=true means the data is old), the',
  'policy (tip-percentile, min-tip, max-tip, escalation-step, max-retries, ...), the previous attempt and its',
  'outcome if any, the leader outlook (whether the current leader runs the bundle engine and the next slot led by',
  'one), the current slot, allowed_tip (the only tips the sidecar accepts), and what the deterministic reflex tier',
  'would do.',
  '',
  'Rules:',
  '- Answer only by calling decide_submission once.',
  '- action "submit" sends an attempt now; "hold" waits (only when no bundle-engine leader is within 2 slots).',
  '- tip_lamports is an integer inside allowed_tip. Target the policy tip-percentile of the floor (one step up',
  '  for high priority, one down for low). After fee_too_low raise the previous tip by at most escalation-step.',
  '  After dropped keep the previous tip. When the floor is stale, do not chase it: stay near the last known floor.',
  '- Jito ranks a bundle by tip per requested compute unit among bundles writing the same accounts. When',
  '  compute_units is given, the floor percentiles are per bundle of about 200,000 CU: price per CU (a light',
  '  transfer needs far less, a 1.4M-CU swap far more), paying more per CU on contended accounts; reflex.pricing',
  '  shows the per-CU bid reflex chose (lamports per CU) and why.',
  '- For tip_mode "included" the tip is 0.',
  '- rationale is one short sentence a human operator can read in the audit log.',
].join('\n');

/** The strict tool schema (numeric bounds are not enforced by the API, so the agent checks them in code). */
export const DECISION_TOOL = {
  name: DECISION_TOOL_NAME,
  description:
    'Decide whether to submit the transaction now or hold it, and the Jito tip in lamports for the attempt.',
  strict: true,
  input_schema: {
    type: 'object' as const,
    additionalProperties: false,
    required: ['action', 'tip_lamports', 'rationale'],
    properties: {
      action: { type: 'string', enum: ['submit', 'hold'] },
      tip_lamports: { type: 'integer', description: 'Tip in lamports, inside allowed_tip.' },
      rationale: { type: 'string', description: 'One sentence: why this action and tip.' },
    },
  },
};

export interface AnthropicDecisionModelOptions {
  /** `ANTHROPIC_API_KEY`. */
  apiKey?: string;
  /** `ANTHROPIC_BASE_URL` (the simnet's Messages endpoint in `relay up --sim`). */
  baseURL?: string;
  /** `AGENT_MODEL`; default `claude-haiku-4-5`. */
  model?: string;
  /** Retries inside the deadline (the deadline signal also cuts the SDK's wait between them). Default 1. */
  maxRetries?: number;
  /** A prebuilt SDK client (tests); `apiKey` / `baseURL` are then ignored. */
  client?: Anthropic;
}

/**
 * The cortex tier's model through `@anthropic-ai/sdk`: one strict `decide_submission` tool, the static prompt
 * marked for caching, a hard deadline by `AbortSignal` (which also cuts a long `retry-after` sleep) and at most one
 * retry. It never throws: every failure becomes `{ ok: false, reason }` for the agent's fallback.
 *
 * @example
 * const model = new AnthropicDecisionModel({ apiKey, baseURL, model: 'claude-haiku-4-5' });
 * const result = await model.decide({ snapshot, deadlineMs: 6000 });
 */
export class AnthropicDecisionModel implements DecisionModel {
  readonly model: string;
  readonly provider = 'anthropic';
  private readonly client: Anthropic;
  private readonly maxRetries: number;

  constructor(options: AnthropicDecisionModelOptions) {
    this.model = options.model ?? DEFAULT_AGENT_MODEL;
    this.maxRetries = Math.min(1, Math.max(0, options.maxRetries ?? 1));
    this.client =
      options.client ??
      new Anthropic({
        // Null (not undefined) keeps the SDK from reading the environment itself: this library reads no env.
        apiKey: options.apiKey ?? null,
        ...(options.baseURL ? { baseURL: options.baseURL } : {}),
        maxRetries: this.maxRetries,
      });
  }

  async decide(request: { snapshot: DecisionSnapshot; deadlineMs: number }): Promise<ModelResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    try {
      const { data, request_id } = await this.client.messages
        .create(
          {
            model: this.model,
            max_tokens: 512,
            system: [{ type: 'text', text: DECISION_SYSTEM_PROMPT, cache_control: { type: 'ephemeral' } }],
            tools: [DECISION_TOOL],
            // Not forced: newer thinking models refuse a forced tool_choice; a missing call is a fallback.
            tool_choice: { type: 'auto' },
            messages: [{ role: 'user', content: JSON.stringify(request.snapshot) }],
          },
          { signal: AbortSignal.timeout(request.deadlineMs), maxRetries: this.maxRetries },
        )
        .withResponse();
      const usage = usageOf(data.usage);
      const requestId = request_id ?? null;
      if (data.stop_reason === 'refusal') {
        return failure('refusal', 'the model refused', requestId, elapsed(), usage);
      }
      const call = data.content.find(
        (block) => block.type === 'tool_use' && block.name === DECISION_TOOL_NAME,
      );
      if (!call || call.type !== 'tool_use') {
        return failure(
          'no_tool_call',
          `stop_reason ${String(data.stop_reason)}`,
          requestId,
          elapsed(),
          usage,
        );
      }
      return {
        ok: true,
        tool_input: call.input,
        request_id: requestId,
        latency_ms: elapsed(),
        usage,
        stop_reason: data.stop_reason ?? null,
      };
    } catch (error) {
      const { reason, detail } = classifyModelError(error);
      const requestId = error instanceof APIError ? (error.requestID ?? null) : null;
      return failure(reason, detail, requestId, elapsed(), null);
    }
  }
}

/** Maps an SDK error to a fallback reason (the SDK's classes; our own deadline abort is a timeout). */
export function classifyModelError(error: unknown): { reason: ModelFailureReason; detail: string } {
  const detail = error instanceof Error ? error.message.split('\n')[0]!.slice(0, 200) : String(error);
  if (error instanceof APIUserAbortError || error instanceof APIConnectionTimeoutError)
    return { reason: 'timeout', detail };
  if (error instanceof APIConnectionError) return { reason: 'connection_error', detail };
  if (error instanceof RateLimitError) return { reason: 'rate_limited', detail };
  if (error instanceof OverloadedError) return { reason: 'overloaded', detail };
  if (error instanceof InternalServerError) return { reason: 'server_error', detail };
  if (error instanceof AuthenticationError || error instanceof PermissionDeniedError)
    return { reason: 'auth_error', detail };
  if (error instanceof APIError)
    return { reason: 'request_error', detail: `${String(error.status)} ${detail}` };
  // A missing key makes the SDK throw before any request; that is the operator's configuration, not the model.
  return { reason: 'request_error', detail };
}

function failure(
  reason: ModelFailureReason,
  detail: string,
  requestId: string | null,
  latencyMs: number,
  usage: ModelUsage | null,
): ModelResult {
  return { ok: false, reason, detail, request_id: requestId, latency_ms: latencyMs, usage };
}

function usageOf(usage: Anthropic.Messages.Usage | undefined): ModelUsage | null {
  if (!usage) return null;
  return {
    input_tokens: usage.input_tokens ?? 0,
    output_tokens: usage.output_tokens ?? 0,
    cache_read_input_tokens: usage.cache_read_input_tokens ?? 0,
    cache_creation_input_tokens: usage.cache_creation_input_tokens ?? 0,
  };
}
