import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Cluster } from './chain/types';
import type { BlockEngine } from './engine/engine';
import { REGIMES, type Regime } from './engine/auction';
import type { Faults, FaultSettings } from './faults';
import { readBody, sendJson, type RouteHandler } from './http';
import { parseScriptStep, type SimLlm } from './llm/llm';

export interface AdminTargets {
  cluster: Cluster;
  faults: Faults;
  engine: BlockEngine;
  llm: SimLlm;
}

class BadRequest extends Error {}

async function jsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const text = (await readBody(req, 256 * 1024)).toString('utf8').trim();
  if (!text) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new BadRequest('body is not valid JSON');
  }
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw new BadRequest('body must be a JSON object');
  return value as Record<string, unknown>;
}

function onlyKeys(body: Record<string, unknown>, allowed: readonly string[]): void {
  for (const key of Object.keys(body)) {
    if (!allowed.includes(key))
      throw new BadRequest(`unknown field "${key}"; expected ${allowed.join(', ')}`);
  }
}

/**
 * The simnet's control surface over HTTP, for tests in other processes and for people at a terminal:
 * faults, one-shot actions, auction pins, the LLM script and a state summary. Every input is validated; anything
 * unknown is a 400 with a message saying what was expected.
 */
export function adminRoutes(targets: AdminTargets): RouteHandler {
  const { cluster, faults, engine, llm } = targets;
  const handlers: Record<string, (req: IncomingMessage) => Promise<unknown> | unknown> = {
    'GET /admin/faults': () => faults.current,
    'POST /admin/faults': async (req) => {
      const body = await jsonBody(req);
      try {
        faults.set(body as Partial<FaultSettings>);
      } catch (error) {
        throw new BadRequest((error as Error).message);
      }
      return faults.current;
    },
    'POST /admin/faults/reset': () => {
      faults.reset();
      return faults.current;
    },
    'POST /admin/actions/cutStreams': () => {
      faults.cutStreams();
      return { ok: true, action: 'cutStreams' };
    },
    'POST /admin/actions/expireBlockhashes': () => {
      faults.expireBlockhashes();
      return { ok: true, action: 'expireBlockhashes' };
    },
    'POST /admin/actions/endBundleResultStreams': () => {
      faults.endBundleResultStreams();
      return { ok: true, action: 'endBundleResultStreams' };
    },
    'GET /admin/state': () => ({
      ...engine.state(),
      finalizedSlot: cluster.slotAt('finalized'),
      confirmedSlot: cluster.slotAt('confirmed'),
      blockHeight: cluster.blockHeight,
      faults: faults.current,
      faultsInjected: faults.injected,
      rateLimit: {
        enabled: engine.rateLimiter.enabled,
        rps: engine.rateLimiter.rps,
        uuidRps: engine.rateLimiter.uuidRps,
        penaltyMs: engine.rateLimiter.penaltyMs,
      },
      llm: { latencyMs: llm.latencyMs, pendingScript: llm.pendingScript, requests: llm.requests.length },
    }),
    // Every bundle the block engine received, accepted or refused, after `?after=<seq>` (an observation only).
    'GET /admin/engine/received': (req) => {
      const after = Number(new URL(req.url ?? '/', 'http://admin').searchParams.get('after') ?? '0');
      if (!Number.isInteger(after) || after < 0) throw new BadRequest('after must be a non-negative integer');
      return engine.received(after);
    },
    'POST /admin/auction': async (req) => {
      const body = await jsonBody(req);
      onlyKeys(body, ['fixedClearingTip', 'fixedClearingTipPerCu', 'regime']);
      // Every key is validated before any is set, so a refused request changes nothing.
      const isPin = (value: unknown) =>
        value === null || (typeof value === 'number' && Number.isFinite(value) && value >= 0);
      if ('fixedClearingTip' in body && !isPin(body.fixedClearingTip))
        throw new BadRequest('fixedClearingTip must be a non-negative number of lamports or null');
      if ('fixedClearingTipPerCu' in body && !isPin(body.fixedClearingTipPerCu))
        throw new BadRequest(
          'fixedClearingTipPerCu must be a non-negative number of lamports per CU or null',
        );
      if ('regime' in body && body.regime !== null && !REGIMES.includes(body.regime as Regime))
        throw new BadRequest(`regime must be one of ${REGIMES.join(', ')} or null`);
      if ('fixedClearingTip' in body)
        engine.auction.setFixedClearingTip(body.fixedClearingTip as number | null);
      if ('fixedClearingTipPerCu' in body)
        engine.auction.setFixedClearingTipPerCu(body.fixedClearingTipPerCu as number | null);
      if ('regime' in body) engine.auction.setRegime(body.regime as Regime | null);
      return {
        fixedClearingTip: engine.auction.fixedClearingTipValue,
        fixedClearingTipPerCu: engine.auction.fixedClearingTipPerCuValue,
        regime: engine.auction.pinnedRegimeValue,
        // The pinned market's offset 0: slot pinnedFromSlot + k meets the same draws for one seed and regime.
        pinnedFromSlot: engine.auction.pinnedFromSlot,
      };
    },
    'POST /admin/rate-limit': async (req) => {
      const body = await jsonBody(req);
      onlyKeys(body, ['enabled', 'rps', 'uuidRps', 'penaltyMs']);
      if ('enabled' in body && typeof body.enabled !== 'boolean')
        throw new BadRequest('enabled must be a boolean');
      for (const key of ['rps', 'uuidRps'] as const) {
        if (key in body && (typeof body[key] !== 'number' || !((body[key] as number) > 0))) {
          throw new BadRequest(`${key} must be a positive number`);
        }
      }
      if ('penaltyMs' in body && (typeof body.penaltyMs !== 'number' || !((body.penaltyMs as number) >= 0)))
        throw new BadRequest('penaltyMs must be a non-negative number');
      if (typeof body.enabled === 'boolean') engine.rateLimiter.enabled = body.enabled;
      if (typeof body.penaltyMs === 'number') engine.rateLimiter.penaltyMs = body.penaltyMs;
      if (typeof body.rps === 'number') engine.rateLimiter.rps = body.rps;
      if (typeof body.uuidRps === 'number') engine.rateLimiter.uuidRps = body.uuidRps;
      engine.rateLimiter.reset();
      return {
        enabled: engine.rateLimiter.enabled,
        rps: engine.rateLimiter.rps,
        uuidRps: engine.rateLimiter.uuidRps,
        penaltyMs: engine.rateLimiter.penaltyMs,
      };
    },
    'GET /admin/llm': () => ({
      latencyMs: llm.latencyMs,
      pendingScript: llm.pendingScript,
      requests: llm.requests.map((r) => ({
        requestId: r.requestId,
        scripted: r.scripted,
        model: r.body.model,
      })),
    }),
    'POST /admin/llm': async (req) => {
      const body = await jsonBody(req);
      onlyKeys(body, ['latencyMs', 'script']);
      if ('latencyMs' in body) {
        if (typeof body.latencyMs !== 'number' || body.latencyMs < 0)
          throw new BadRequest('latencyMs must be >= 0');
      }
      if ('script' in body && !Array.isArray(body.script))
        throw new BadRequest('script must be a list of steps');
      let steps;
      try {
        steps = ((body.script as unknown[] | undefined) ?? []).map(parseScriptStep);
      } catch (error) {
        throw new BadRequest((error as Error).message);
      }
      if (typeof body.latencyMs === 'number') llm.setLatency(body.latencyMs);
      llm.script(...steps);
      return { latencyMs: llm.latencyMs, pendingScript: llm.pendingScript };
    },
    'POST /admin/llm/reset': () => {
      llm.reset();
      return { latencyMs: llm.latencyMs, pendingScript: llm.pendingScript };
    },
  };

  return async (req: IncomingMessage, res: ServerResponse, url: URL) => {
    if (!url.pathname.startsWith('/admin/')) return false;
    const handler = handlers[`${req.method} ${url.pathname}`];
    if (!handler) {
      const known = Object.keys(handlers).join(', ');
      sendJson(res, 404, {
        error: { message: `no admin route ${req.method} ${url.pathname}; known: ${known}` },
      });
      return true;
    }
    try {
      sendJson(res, 200, await handler(req));
    } catch (error) {
      if (error instanceof BadRequest) sendJson(res, 400, { error: { message: error.message } });
      else throw error;
    }
    return true;
  };
}
