import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readBody, sendJson, type RouteHandler } from '../http';
import {
  DECISION_TOOL,
  SIMNET_PREFIX,
  decideSubmission,
  parseSnapshot,
  sampleFromSchema,
  type Decision,
} from './heuristic';

/** One scripted behaviour for the next request (the queue is consumed in order, one step per request). */
export type LlmScriptStep =
  | { kind: 'rate_limit'; retryAfterS?: number }
  | { kind: 'overloaded' }
  | { kind: 'server_error' }
  | { kind: 'hang' }
  | { kind: 'refusal' }
  | { kind: 'no_tool' }
  | { kind: 'malformed'; variant: MalformedVariant };

export type MalformedVariant = 'tip_above_cap' | 'negative_tip' | 'non_integer_tip' | 'wrong_action';
export const MALFORMED_VARIANTS: readonly MalformedVariant[] = [
  'tip_above_cap',
  'negative_tip',
  'non_integer_tip',
  'wrong_action',
];
const STEP_KINDS = ['rate_limit', 'overloaded', 'server_error', 'hang', 'refusal', 'no_tool', 'malformed'];

/** What the endpoint saw, for assertions in agent tests. */
export interface RecordedLlmRequest {
  requestId: string;
  headers: { authorization: boolean; apiKey: boolean; anthropicVersion: string | null };
  body: Record<string, unknown>;
  /** The scripted step applied, if any. */
  scripted: LlmScriptStep['kind'] | null;
}

/** Validate a script step coming from JSON (the admin route); throws with a message on anything unknown. */
export function parseScriptStep(value: unknown): LlmScriptStep {
  if (!value || typeof value !== 'object') throw new Error('a script step is an object with a "kind"');
  const step = value as { kind?: unknown; variant?: unknown; retryAfterS?: unknown };
  if (typeof step.kind !== 'string' || !STEP_KINDS.includes(step.kind)) {
    throw new Error(
      `unknown script step kind "${String(step.kind)}"; expected one of ${STEP_KINDS.join(', ')}`,
    );
  }
  if (step.kind === 'malformed') {
    if (!MALFORMED_VARIANTS.includes(step.variant as MalformedVariant)) {
      throw new Error(`malformed step needs a variant: one of ${MALFORMED_VARIANTS.join(', ')}`);
    }
    return { kind: 'malformed', variant: step.variant as MalformedVariant };
  }
  if (step.kind === 'rate_limit') {
    if (step.retryAfterS !== undefined && (typeof step.retryAfterS !== 'number' || step.retryAfterS < 0)) {
      throw new Error('retryAfterS must be a non-negative number');
    }
    return step.retryAfterS === undefined
      ? { kind: 'rate_limit' }
      : { kind: 'rate_limit', retryAfterS: step.retryAfterS };
  }
  return { kind: step.kind } as LlmScriptStep;
}

interface CacheEntry {
  expiresMs: number;
}

export interface SimLlmOptions {
  /** When set, only this key is accepted (else any non-empty key). */
  apiKey?: string;
  now?: () => number;
}

/**
 * An Anthropic-compatible Messages endpoint that answers from a deterministic heuristic (see heuristic.ts), plus a
 * script of faults for agent tests. It says it is simulated: every rationale starts with "[simnet]" and every
 * response carries `x-simnet: simulated`.
 */
export class SimLlm {
  latencyMs = 0;
  readonly requests: RecordedLlmRequest[] = [];
  private readonly queue: LlmScriptStep[] = [];
  private readonly cache = new Map<string, CacheEntry>();
  private readonly hanging = new Set<ServerResponse>();
  private counter = 0;
  private readonly apiKey: string | undefined;
  private readonly now: () => number;

  constructor(options: SimLlmOptions = {}) {
    this.apiKey = options.apiKey;
    this.now = options.now ?? Date.now;
  }

  /** Queue behaviours for the next requests, one per request, in order. */
  script(...steps: LlmScriptStep[]): void {
    for (const step of steps) this.queue.push(parseScriptStep(step));
  }

  /** Steps not yet consumed. */
  get pendingScript(): readonly LlmScriptStep[] {
    return [...this.queue];
  }

  setLatency(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new Error('latency must be a non-negative number of ms');
    this.latencyMs = ms;
  }

  /** Clear the script, latency, cache and recorded requests; release hanging requests. */
  reset(): void {
    this.queue.length = 0;
    this.latencyMs = 0;
    this.cache.clear();
    this.requests.length = 0;
    this.releaseHanging();
  }

  /** End every held-open ("hang") response, e.g. at shutdown. */
  releaseHanging(): void {
    for (const res of this.hanging) res.destroy();
    this.hanging.clear();
  }

  routes(): RouteHandler {
    return async (req, res, url) => {
      const path = url.pathname;
      if (req.method === 'POST' && path.endsWith('/v1/messages')) {
        await this.handleMessages(req, res);
        return true;
      }
      const model = /\/v1\/models\/([^/]+)$/.exec(path);
      if (req.method === 'GET' && (model || path.endsWith('/v1/models'))) {
        if (!this.authorized(req, res)) return true;
        const info = (id: string) => ({
          type: 'model',
          id,
          display_name: `${id} (simnet)`,
          created_at: '2026-01-01T00:00:00Z',
        });
        if (model) sendJson(res, 200, info(decodeURIComponent(model[1] as string)), this.headers());
        else
          sendJson(
            res,
            200,
            {
              data: [info('simnet-model')],
              has_more: false,
              first_id: 'simnet-model',
              last_id: 'simnet-model',
            },
            this.headers(),
          );
        return true;
      }
      return false;
    };
  }

  private nextId(prefix: string): string {
    this.counter += 1;
    return `${prefix}_simnet_${String(this.counter).padStart(8, '0')}`;
  }

  private headers(requestId = this.nextId('req')): Record<string, string> {
    return { 'request-id': requestId, 'x-simnet': 'simulated' };
  }

  private error(
    res: ServerResponse,
    status: number,
    type: string,
    message: string,
    extra: Record<string, string> = {},
  ) {
    sendJson(res, status, { type: 'error', error: { type, message } }, { ...this.headers(), ...extra });
  }

  private authorized(req: IncomingMessage, res: ServerResponse): boolean {
    const apiKey = req.headers['x-api-key'];
    const bearer = /^Bearer\s+(.+)$/i.exec(String(req.headers.authorization ?? ''))?.[1];
    const key = (typeof apiKey === 'string' && apiKey) || bearer;
    if (!key) {
      this.error(res, 401, 'authentication_error', 'x-api-key header or Authorization: Bearer is required');
      return false;
    }
    if (this.apiKey !== undefined && key !== this.apiKey) {
      this.error(res, 401, 'authentication_error', 'invalid x-api-key');
      return false;
    }
    return true;
  }

  private async handleMessages(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req).catch(() => null);
    if (!this.authorized(req, res)) return;
    const version = req.headers['anthropic-version'];
    if (typeof version !== 'string' || !version) {
      this.error(res, 400, 'invalid_request_error', 'anthropic-version: header is required');
      return;
    }
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw?.toString('utf8') ?? '');
      if (!body || typeof body !== 'object' || Array.isArray(body)) throw new Error('not an object');
    } catch {
      this.error(res, 400, 'invalid_request_error', 'request body is not valid JSON');
      return;
    }
    const problem = validateRequest(body);
    if (problem) {
      this.error(res, 400, 'invalid_request_error', problem);
      return;
    }
    const step = this.queue.shift() ?? null;
    const requestId = this.nextId('req');
    this.requests.push({
      requestId,
      headers: {
        authorization: typeof req.headers.authorization === 'string',
        apiKey: typeof req.headers['x-api-key'] === 'string',
        anthropicVersion: version,
      },
      body,
      scripted: step?.kind ?? null,
    });
    if (this.latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.latencyMs));
    if (res.destroyed) return;
    const headers = this.headers(requestId);

    switch (step?.kind) {
      case 'rate_limit':
        return sendJson(
          res,
          429,
          {
            type: 'error',
            error: { type: 'rate_limit_error', message: `${SIMNET_PREFIX} rate limited (scripted)` },
          },
          { ...headers, 'retry-after': String(step.retryAfterS ?? 1) },
        );
      case 'overloaded':
        return sendJson(
          res,
          529,
          { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
          headers,
        );
      case 'server_error':
        return sendJson(
          res,
          500,
          { type: 'error', error: { type: 'api_error', message: 'Internal server error' } },
          headers,
        );
      case 'hang':
        // Never answer; the client's deadline must fire. Released on reset/stop.
        this.hanging.add(res);
        res.on('close', () => this.hanging.delete(res));
        return;
      default:
        return sendJson(res, 200, this.message(body, step), headers);
    }
  }

  private message(body: Record<string, unknown>, step: LlmScriptStep | null): Record<string, unknown> {
    const model = String(body.model);
    const tools = Array.isArray(body.tools) ? (body.tools as Array<Record<string, unknown>>) : [];
    const toolChoice = body.tool_choice as { type?: string; name?: string } | undefined;
    const snapshotText = lastUserText(body.messages);
    let content: Array<Record<string, unknown>>;
    let stopReason: string;

    if (step?.kind === 'refusal') {
      content = [{ type: 'text', text: `${SIMNET_PREFIX} I can't help with that request.` }];
      stopReason = 'refusal';
    } else if (tools.length === 0 || step?.kind === 'no_tool' || toolChoice?.type === 'none') {
      const decision = decideSubmission(parseSnapshot(snapshotText));
      content = [{ type: 'text', text: decision.rationale }];
      stopReason = 'end_turn';
    } else {
      const forced = toolChoice?.type === 'tool' ? tools.find((t) => t.name === toolChoice.name) : undefined;
      const tool =
        forced ?? tools.find((t) => t.name === DECISION_TOOL) ?? (tools[0] as Record<string, unknown>);
      const name = String(tool.name);
      let input: Record<string, unknown>;
      if (name === DECISION_TOOL) {
        const snapshot = parseSnapshot(snapshotText);
        const decision = decideSubmission(snapshot);
        input =
          step?.kind === 'malformed' ? malform(decision, step.variant, snapshot?.policy) : { ...decision };
      } else {
        input = sampleFromSchema(tool.input_schema as never, name) as Record<string, unknown>;
      }
      content = [{ type: 'tool_use', id: this.nextId('toolu'), name, input }];
      stopReason = 'tool_use';
    }
    return {
      id: this.nextId('msg'),
      type: 'message',
      role: 'assistant',
      model,
      content,
      stop_reason: stopReason,
      stop_sequence: null,
      usage: this.usage(body, content),
    };
  }

  /** Token counts (≈ 4 characters a token) with prompt caching: a cache_control'd prefix is read on repeat. */
  private usage(body: Record<string, unknown>, content: unknown): Record<string, unknown> {
    const tokens = (value: unknown) =>
      value === undefined ? 0 : Math.ceil(JSON.stringify(value).length / 4);
    const prefix = { tools: body.tools, system: body.system };
    const cacheable =
      hasCacheControl(body.system) || hasCacheControl(body.tools) || body.cache_control !== undefined;
    const prefixTokens = tokens(body.tools) + tokens(body.system);
    const total = prefixTokens + tokens(body.messages);
    let read = 0;
    let created = 0;
    if (cacheable && prefixTokens > 0) {
      const key = createHash('sha256')
        .update(`${String(body.model)}\n${JSON.stringify(prefix)}`)
        .digest('hex');
      const now = this.now();
      const hit = this.cache.get(key);
      if (hit && hit.expiresMs > now) read = prefixTokens;
      else created = prefixTokens;
      this.cache.set(key, {
        expiresMs: now + (JSON.stringify(prefix).includes('"ttl":"1h"') ? 3_600_000 : 300_000),
      });
    }
    return {
      input_tokens: total - read - created,
      output_tokens: tokens(content),
      cache_creation_input_tokens: created,
      cache_read_input_tokens: read,
      cache_creation: { ephemeral_5m_input_tokens: created, ephemeral_1h_input_tokens: 0 },
      service_tier: 'standard',
    };
  }
}

function malform(decision: Decision, variant: MalformedVariant, policy: Record<string, unknown> | undefined) {
  const maxTip = typeof policy?.['max-tip'] === 'number' ? (policy['max-tip'] as number) : 2_000_000;
  switch (variant) {
    case 'tip_above_cap':
      return { ...decision, tip_lamports: maxTip * 10 };
    case 'negative_tip':
      return { ...decision, tip_lamports: -Math.max(1, decision.tip_lamports) };
    case 'non_integer_tip':
      return { ...decision, tip_lamports: decision.tip_lamports + 0.5 };
    case 'wrong_action':
      return { ...decision, action: 'send_now' };
  }
}

function hasCacheControl(value: unknown): boolean {
  return (
    Array.isArray(value) &&
    value.some((block) => block && typeof block === 'object' && 'cache_control' in block)
  );
}

function lastUserText(messages: unknown): string {
  if (!Array.isArray(messages)) return '';
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i] as { role?: string; content?: unknown };
    if (message?.role !== 'user') continue;
    if (typeof message.content === 'string') return message.content;
    if (Array.isArray(message.content)) {
      return message.content
        .filter((b: { type?: string }) => b?.type === 'text')
        .map((b: { text?: string }) => b.text ?? '')
        .join('\n');
    }
  }
  return '';
}

function validateRequest(body: Record<string, unknown>): string | null {
  if (typeof body.model !== 'string' || !body.model) return 'model: field required';
  if (typeof body.max_tokens !== 'number' || body.max_tokens < 0) return 'max_tokens: field required';
  if (!Array.isArray(body.messages) || body.messages.length === 0)
    return 'messages: at least one message is required';
  if (body.stream === true) return `${SIMNET_PREFIX} streaming is not simulated; call without stream`;
  if (body.tools !== undefined && !Array.isArray(body.tools)) return 'tools: must be a list';
  const choice = body.tool_choice as { type?: string; name?: string } | undefined;
  if (choice?.type === 'tool') {
    const tools = (body.tools as Array<{ name?: string }> | undefined) ?? [];
    if (!tools.some((t) => t.name === choice.name))
      return `tool_choice: tool "${String(choice.name)}" not found in tools`;
  }
  return null;
}
