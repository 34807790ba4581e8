import {
  CONTENTION_CLASSES,
  LifecycleEntrySchema,
  PRIORITIES,
  PolicySchema,
  QUEUED_TX_STATES,
  RELAY_ERRORS,
  RELAY_EVENT_NAMES,
  UNPRICED,
} from '@solrelay/core';
import { z } from 'zod';

/**
 * OpenAPI 3.1 of the HTTP API. Schemas that core defines with zod (lifecycle entry, policy) are generated from
 * them, so the document cannot drift from what the server validates.
 */
export function openApiDocument(): Record<string, unknown> {
  const errorCodes = Object.keys(RELAY_ERRORS);
  const error = {
    type: 'object',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message', 'details'],
        properties: {
          code: { type: 'string', enum: errorCodes },
          message: { type: 'string' },
          details: { type: 'object' },
        },
      },
    },
  };
  const errors = (...statuses: number[]) =>
    Object.fromEntries(
      statuses.map((s) => [
        String(s),
        {
          description: statusText(s),
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
      ]),
    );
  const json = (schema: unknown, description = 'OK') => ({
    description,
    content: { 'application/json': { schema } },
  });
  const sse = (description: string) => ({
    description,
    content: { 'text/event-stream': { schema: { type: 'string' } } },
  });
  const txId = {
    name: 'tx_id',
    in: 'path',
    required: true,
    schema: { type: 'string', pattern: '^tx_[0-9A-HJKMNP-TV-Z]{26}$' },
  };

  return {
    openapi: '3.1.0',
    info: {
      title: 'relay sidecar API',
      version: '1',
      description: `Queue signed Solana transactions, submit them as Jito bundles, follow them to finalization. SSE events: ${RELAY_EVENT_NAMES.join(', ')}.`,
    },
    servers: [{ url: 'http://127.0.0.1:7777' }],
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'Required on every route but /healthz when RELAY_API_TOKEN is set',
        },
      },
      schemas: {
        Error: error,
        LifecycleEntry: z.toJSONSchema(LifecycleEntrySchema, { io: 'output' }),
        LandingStat: {
          type: 'object',
          required: [
            'submitted',
            'landed',
            'lost',
            'tips_paid_lamports',
            'landed_share',
            'lamports_per_landed',
          ],
          properties: {
            submitted: { type: 'integer', description: 'Bundles an engine took (an id back)' },
            landed: { type: 'integer', description: 'Bundles that landed, counted at confirmed' },
            lost: { type: 'integer', description: 'Bundles an engine took that ended without landing' },
            tips_paid_lamports: { type: 'integer', description: 'Tips of the landed bundles' },
            landed_share: {
              type: ['number', 'null'],
              description: 'landed / (landed + lost); null while none settled',
            },
            lamports_per_landed: {
              type: ['integer', 'null'],
              description: 'tips_paid_lamports / landed; null while none landed',
            },
          },
        },
        Policy: z.toJSONSchema(PolicySchema, { io: 'output' }),
        EnqueueRequest: {
          type: 'object',
          properties: {
            transactions: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 4 },
            transaction: { type: 'string' },
            encoding: { type: 'string', enum: ['base64', 'base58'], default: 'base64' },
            priority: { type: 'string', enum: ['low', 'normal', 'high'], default: 'normal' },
            tip: { type: 'string', enum: ['auto', 'included'], default: 'auto' },
            expiry_slots: { type: 'integer', minimum: 1, maximum: 10000 },
            max_tip: { type: 'integer', minimum: 0 },
          },
        },
        EnqueueResponse: {
          type: 'object',
          required: ['tx_id', 'state', 'slot', 'signatures'],
          properties: {
            tx_id: { type: 'string' },
            state: { type: 'string' },
            slot: { type: 'integer' },
            signatures: { type: 'array', items: { type: 'string' } },
          },
        },
        SubmitRequest: {
          type: 'object',
          required: ['tx_id', 'tip_lamports', 'reason'],
          properties: {
            tx_id: { type: 'string' },
            tip_lamports: { type: 'integer', minimum: 0 },
            reason: { type: 'string' },
            escalated: { type: 'boolean' },
            trace: { type: ['object', 'null'] },
            pricing: {
              type: 'object',
              description:
                'How the tip was priced per requested CU (DESIGN §11): recorded on the attempt and its lifecycle entry; a pack never ranks it below bid_per_cu',
              required: ['bid_per_cu', 'contention', 'signal'],
              properties: {
                bid_per_cu: { type: 'number', minimum: 0 },
                contention: { type: 'string', enum: [...CONTENTION_CLASSES] },
                signal: { type: 'string' },
              },
            },
          },
        },
        SubmitResponse: {
          type: 'object',
          required: ['tx_id', 'bundle_id', 'tip_lamports'],
          properties: {
            tx_id: { type: 'string' },
            bundle_id: { type: 'string' },
            tip_lamports: { type: 'integer' },
          },
        },
        Mode: {
          type: 'object',
          required: ['decision_mode'],
          properties: { decision_mode: { type: 'string', enum: ['cortex', 'reflex'] } },
        },
        Tipper: {
          type: 'object',
          required: [
            'pubkey',
            'balance_lamports',
            'reserved_lamports',
            'in_flight',
            'available_lamports',
            'held_reason',
          ],
          properties: {
            pubkey: { type: 'string', description: 'The tipper account (base58)' },
            balance_lamports: {
              type: ['integer', 'null'],
              description: 'At its last read (confirmed); null before the first',
            },
            reserved_lamports: {
              type: 'integer',
              description: 'Tips and fees of its attempts that may still take from it after that read',
            },
            in_flight: { type: 'integer', description: 'Its attempts built or sent and not settled' },
            available_lamports: {
              type: ['integer', 'null'],
              description:
                'What a new tip and its fee may take: balance - reserved - the rent-exempt minimum',
            },
            held_reason: {
              type: ['string', 'null'],
              description:
                'Why it is passed over: its own tip transaction failed and its balance does not cover it yet',
            },
          },
        },
        Status: {
          type: 'object',
          required: [
            'slot',
            'leader',
            'bundle_engine_leader',
            'next_bundle_engine_leader_slot',
            'tip',
            'stale',
            'decision_mode',
            'bypass',
            'queue',
            'agent',
            'upstream',
            'tipper',
            'tippers',
            'spend',
            'paused_reason',
            'block_engine_regions',
            'capacity',
            'webhooks',
            'fleet',
            'landing',
          ],
          properties: {
            slot: { type: 'integer' },
            leader: { type: ['string', 'null'] },
            bundle_engine_leader: { type: ['boolean', 'null'] },
            next_bundle_engine_leader_slot: { type: ['integer', 'null'] },
            tip: {
              type: 'object',
              properties: { p50: { type: 'integer' }, p75: { type: 'integer' } },
            },
            stale: { type: 'boolean' },
            decision_mode: { type: 'string', enum: ['cortex', 'reflex'] },
            bypass: { type: 'boolean' },
            queue: { type: 'integer', description: 'Transactions not yet terminal' },
            agent: { type: 'object' },
            upstream: {
              type: 'object',
              description: 'stream, rpc, block_engine, tip_floor: each {ok, detail, last_ok_at}',
            },
            tipper: {
              type: 'object',
              description:
                "The first tipper of the pool (KEYPAIR_PATH's first file), for callers that read one",
              required: ['pubkey', 'balance_lamports'],
              properties: {
                pubkey: { type: 'string' },
                balance_lamports: { type: ['integer', 'null'] },
              },
            },
            tippers: {
              type: 'array',
              description: 'Every tipper of the pool, in KEYPAIR_PATH order',
              items: { $ref: '#/components/schemas/Tipper' },
            },
            spend: {
              type: 'object',
              properties: { window_lamports: { type: 'integer' }, limit_lamports: { type: 'integer' } },
            },
            paused_reason: {
              type: ['string', 'null'],
              description:
                'Why submission waits: every tipper held, none can pay a min-tip tip, or a transaction waits with a tip none can pay (names the closest tipper and its shortfall)',
            },
            block_engine_regions: {
              type: 'array',
              description:
                'Each regional block engine bundles go to (BUNDLE_ENGINE_URL), in configured order',
              items: {
                type: 'object',
                required: ['region', 'url', 'cooling_ms', 'accepted', 'rejected', 'transport_errors'],
                properties: {
                  region: {
                    type: 'string',
                    description: "The engine's name for it (GetRegions), else the host's",
                  },
                  url: { type: 'string' },
                  cooling_ms: {
                    type: 'integer',
                    description:
                      'How long a 429 or a failure still keeps it from sending; 0 when it takes bundles',
                  },
                  accepted: { type: 'integer' },
                  rejected: { type: 'integer' },
                  transport_errors: { type: 'integer' },
                },
              },
            },
            capacity: {
              type: 'object',
              description:
                'What relay can send and what waits (what admission refuses with RELAY_E_CAPACITY_EXCEEDED)',
              required: [
                'send_rate_per_s',
                'landed_share',
                'slot_ms',
                'waiting',
                'expected_wait_s',
                'refused_total',
              ],
              properties: {
                send_rate_per_s: {
                  type: 'number',
                  description: 'Regions taking bundles x BUNDLE_ENGINE_RPS',
                },
                landed_share: {
                  type: 'number',
                  description:
                    'Recent share of settled bundles that landed (at least 0.25): admission counts send_rate_per_s x transactions per bundle x this',
                },
                slot_ms: { type: 'integer', description: 'Milliseconds per slot as relay measures it' },
                waiting: { type: 'integer', description: 'Transactions waiting for an attempt to go out' },
                expected_wait_s: { type: 'number' },
                refused_total: { type: 'integer' },
              },
            },
            webhooks: { type: 'array', items: { type: 'object' } },
            landing: {
              type: 'object',
              description:
                'What became of the bundles sent since start, by the regional engine that took each one (configured regions first; unknown: not recorded) and by the contention class its tip was priced for (unpriced: not priced per CU)',
              required: ['by_region', 'by_contention'],
              properties: {
                by_region: {
                  type: 'array',
                  items: {
                    allOf: [
                      { $ref: '#/components/schemas/LandingStat' },
                      { type: 'object', required: ['region'], properties: { region: { type: 'string' } } },
                    ],
                  },
                },
                by_contention: {
                  type: 'array',
                  items: {
                    allOf: [
                      { $ref: '#/components/schemas/LandingStat' },
                      {
                        type: 'object',
                        required: ['contention'],
                        properties: {
                          contention: { type: 'string', enum: [...CONTENTION_CLASSES, UNPRICED] },
                        },
                      },
                    ],
                  },
                },
              },
            },
            fleet: {
              type: ['object', 'null'],
              description:
                "This host's session and its database's sessions (PostgreSQL store, DESIGN §10); null on the local journal",
              required: ['host_id', 'epoch', 'lease_ms', 'live', 'hosts'],
              properties: {
                host_id: { type: 'string', description: 'RELAY_HOST_ID' },
                epoch: { type: 'integer' },
                lease_ms: { type: 'integer', description: 'RELAY_LEASE_MS' },
                live: { type: 'boolean' },
                hosts: {
                  type: ['array', 'null'],
                  description:
                    'Sessions not ended and those ended in the last 10 minutes; null if unreadable',
                  items: {
                    type: 'object',
                    required: [
                      'host_id',
                      'epoch',
                      'started_at',
                      'heartbeat_age_ms',
                      'lease_remaining_ms',
                      'live',
                      'ended_at',
                      'owned',
                    ],
                    properties: {
                      host_id: { type: 'string' },
                      epoch: { type: 'integer' },
                      started_at: { type: 'string', format: 'date-time' },
                      heartbeat_age_ms: { type: 'integer' },
                      lease_remaining_ms: { type: 'integer' },
                      live: { type: 'boolean' },
                      ended_at: { type: ['string', 'null'], format: 'date-time' },
                      owned: { type: 'integer', description: 'Live transactions this session owns' },
                    },
                  },
                },
              },
            },
          },
        },
        Queue: {
          type: 'object',
          required: ['pending', 'by_state', 'evicted_total', 'entries'],
          properties: {
            pending: {
              type: 'integer',
              description: 'Every transaction not yet terminal, whatever its state (by_state splits it)',
            },
            by_state: {
              type: 'object',
              description: 'The same transactions counted by state; pending ones wait to be sent',
              required: [...QUEUED_TX_STATES],
              properties: Object.fromEntries(QUEUED_TX_STATES.map((s) => [s, { type: 'integer' }])),
            },
            evicted_total: { type: 'integer' },
            entries: {
              type: 'array',
              items: {
                type: 'object',
                required: ['tx_id', 'state', 'age_slots', 'priority', 'retries'],
                properties: {
                  tx_id: { type: 'string' },
                  state: { type: 'string', enum: [...QUEUED_TX_STATES] },
                  age_slots: { type: 'integer' },
                  priority: { type: 'string', enum: [...PRIORITIES] },
                  retries: { type: 'integer' },
                },
              },
            },
          },
        },
      },
    },
    security: [{ bearer: [] }],
    paths: {
      '/tx/enqueue': {
        post: {
          summary: 'Enqueue 1 to 4 signed transactions that land together',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/EnqueueRequest' } } },
          },
          responses: {
            '202': json({ $ref: '#/components/schemas/EnqueueResponse' }, 'Accepted'),
            '200': json(
              { $ref: '#/components/schemas/EnqueueResponse' },
              'Already accepted (same first signature)',
            ),
            ...errors(400, 401, 409, 413, 415, 422, 429, 503),
          },
        },
      },
      '/tx/{tx_id}': {
        get: {
          summary: 'The full record of one transaction',
          parameters: [txId],
          responses: { '200': json({ type: 'object' }), ...errors(401, 404) },
        },
      },
      '/tx/events/{tx_id}': {
        get: {
          summary:
            'tx_status_changed for one transaction: current state first, closes after a terminal state',
          parameters: [txId],
          responses: { '200': sse('Event stream'), ...errors(401, 404) },
        },
      },
      '/internal/events': {
        get: {
          summary:
            'Every event; resumes from Last-Event-ID (<bootId>-<seq>; on PostgreSQL the event cursor <xid>.<id>) or sends resync',
          parameters: [
            { name: 'Last-Event-ID', in: 'header', required: false, schema: { type: 'string' } },
            {
              name: 'scope',
              in: 'query',
              required: false,
              description:
                "In a fleet (RELAY_FLEET): fleet (default) carries every host's events; host only this sidecar's own (the agent's)",
              schema: { type: 'string', enum: ['fleet', 'host'], default: 'fleet' },
            },
          ],
          responses: { '200': sse('Event stream'), ...errors(400, 401) },
        },
      },
      '/internal/submit': {
        post: {
          summary: 'Submit an attempt at a tip (policy enforced; never clamped)',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/SubmitRequest' } } },
          },
          responses: {
            '202': json({ $ref: '#/components/schemas/SubmitResponse' }, 'Accepted'),
            ...errors(400, 401, 404, 409, 415, 422, 503),
          },
        },
      },
      '/internal/mode': {
        get: {
          summary: 'Current decision mode',
          responses: { '200': json({ $ref: '#/components/schemas/Mode' }), ...errors(401) },
        },
        post: {
          summary: 'Switch the decision mode at runtime',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Mode' } } },
          },
          responses: { '200': json({ $ref: '#/components/schemas/Mode' }), ...errors(400, 401, 415) },
        },
      },
      '/internal/agent/presence': {
        get: {
          summary: 'The agent holds this open to register; first event `registered` with the mode',
          parameters: [
            { name: 'model', in: 'query', required: true, schema: { type: 'string' } },
            { name: 'provider', in: 'query', required: true, schema: { type: 'string' } },
          ],
          responses: { '200': sse('Presence stream'), ...errors(400, 401) },
        },
      },
      '/internal/agent/info': {
        get: {
          summary: 'The connected agent',
          responses: {
            '200': json({
              type: 'object',
              properties: {
                model: { type: 'string' },
                provider: { type: 'string' },
                connected_since: { type: 'integer' },
              },
            }),
            ...errors(401, 404),
          },
        },
      },
      '/status': {
        get: {
          summary: 'Slot, leader, tip, mode, queue, agent, upstream health, tippers, spend, paused reason',
          responses: { '200': json({ $ref: '#/components/schemas/Status' }), ...errors(401) },
        },
      },
      '/tip': {
        get: {
          summary: 'Tip floor percentiles in lamports',
          responses: { '200': json({ type: 'object' }), ...errors(401) },
        },
      },
      '/queue': {
        get: {
          summary: 'Transactions not yet terminal, each with its state; counts by state; evicted_total',
          responses: { '200': json({ $ref: '#/components/schemas/Queue' }), ...errors(401) },
        },
      },
      '/lifecycle': {
        get: {
          summary: 'Recent lifecycle entries, most recent last',
          parameters: [
            {
              name: 'last',
              in: 'query',
              required: false,
              schema: { type: 'integer', minimum: 1, maximum: 10000, default: 10 },
            },
          ],
          responses: {
            '200': json({
              type: 'object',
              properties: {
                entries: { type: 'array', items: { $ref: '#/components/schemas/LifecycleEntry' } },
              },
            }),
            ...errors(400, 401),
          },
        },
      },
      '/bundle/{bundle_id}': {
        get: {
          summary: 'One bundle’s full lifecycle entry',
          parameters: [
            {
              name: 'bundle_id',
              in: 'path',
              required: true,
              schema: { type: 'string', pattern: '^[0-9a-f]{64}$' },
            },
          ],
          responses: {
            '200': json({ $ref: '#/components/schemas/LifecycleEntry' }),
            ...errors(400, 401, 404),
          },
        },
      },
      '/policy': {
        get: {
          summary: 'Resolved policy, overrides, file path, problems',
          responses: { '200': json({ type: 'object' }), ...errors(401) },
        },
      },
      '/healthz': {
        get: {
          summary: 'Liveness (no token needed)',
          security: [],
          responses: { '200': json({ type: 'object' }) },
        },
      },
      '/readyz': {
        get: { summary: 'Readiness', responses: { '200': json({ type: 'object' }), ...errors(401, 503) } },
      },
      '/metrics': {
        get: {
          summary: 'Prometheus metrics',
          responses: { '200': { description: 'text/plain exposition' }, ...errors(401) },
        },
      },
      '/openapi.json': { get: { summary: 'This document', responses: { '200': json({ type: 'object' }) } } },
    },
  };
}

function statusText(status: number): string {
  return (
    {
      400: 'Malformed request',
      401: 'Missing or bad token',
      404: 'Unknown id',
      409: 'Wrong state',
      413: 'Body too large',
      415: 'Content-Type must be application/json',
      422: 'Policy violation or impossible request',
      429: 'Queue full or rate limited (Retry-After)',
      503: 'Not ready (RELAY_E_NOT_READY), or the database unavailable (RELAY_E_DB_UNAVAILABLE, RELAY_E_DB_COMMIT_UNKNOWN; Retry-After)',
    }[status] ?? 'Error'
  );
}
