import type { IncomingMessage, ServerResponse } from 'node:http';
import { clientIp, isJsonContentType, readBody, sendJson, sendText, type RouteHandler } from '../http';
import type { BlockEngine } from './engine';
import { decodeWire, parseTransaction, type WireEncoding } from './wire';
import { BundleErrors } from './validate';

const BUNDLE_METHODS = ['sendBundle', 'getBundleStatuses', 'getInflightBundleStatuses', 'getTipAccounts'];
/** Paths the engine answers JSON-RPC on, and which methods each takes (jito.md §1.1: both path styles exist). */
const PATH_METHODS: Record<string, readonly string[]> = {
  '/api/v1/bundles': BUNDLE_METHODS,
  '/api/v1/transactions': ['sendTransaction'],
  '/api/v1/sendBundle': BUNDLE_METHODS,
  '/api/v1/getBundleStatuses': BUNDLE_METHODS,
  '/api/v1/getInflightBundleStatuses': BUNDLE_METHODS,
  '/api/v1/getTipAccounts': BUNDLE_METHODS,
};
const MAX_STATUS_IDS = 5;

type JsonRpcId = string | number | null;

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly httpStatus = 400,
  ) {
    super(message);
  }
}

function rpcError(
  res: ServerResponse,
  id: JsonRpcId,
  code: number,
  message: string,
  status = 400,
  headers = {},
): void {
  sendJson(res, status, { jsonrpc: '2.0', error: { code, message, data: null }, id }, headers);
}

function parseEncoding(options: unknown): WireEncoding {
  if (options === undefined || options === null) return 'base58';
  if (typeof options !== 'object') throw new RpcError(-32602, 'Invalid params: expected an options object');
  const encoding = (options as { encoding?: unknown }).encoding;
  if (encoding === undefined) return 'base58';
  if (encoding === 'base58' || encoding === 'base64') return encoding;
  throw new RpcError(
    -32602,
    `Invalid params: unsupported encoding: ${String(encoding)}. Supported encodings: base58, base64`,
  );
}

function stringArray(value: unknown, what: string): string[] {
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) {
    throw new RpcError(-32602, `Invalid params: ${what} must be an array of strings`);
  }
  return value;
}

function statusIds(params: unknown[]): string[] {
  const ids = stringArray(params[0], 'bundle ids');
  if (ids.length > MAX_STATUS_IDS) {
    throw new RpcError(-32602, `Invalid params: exceeded maximum number of bundle ids (${MAX_STATUS_IDS})`);
  }
  return ids;
}

/**
 * One regional block engine's JSON-RPC face (`/api/v1/bundles`, `/api/v1/transactions` and the per-method paths)
 * plus the tip-floor REST route. Every JSON-RPC request first passes the engine's faults and that region's per-IP
 * rate limit; bundles it takes are that region's (their gRPC results go to its stream).
 */
export function engineJsonRpcRoutes(engine: BlockEngine, region: string = engine.homeRegion): RouteHandler {
  return async (req: IncomingMessage, res: ServerResponse, url: URL) => {
    if (req.method === 'GET' && url.pathname === '/api/v1/bundles/tip_floor') {
      await engine.delay();
      sendJson(res, 200, engine.tipFloorEntries());
      return true;
    }
    const methods = PATH_METHODS[url.pathname];
    if (!methods) return false;
    if (req.method !== 'POST') {
      rpcError(res, null, -32600, 'Invalid request: use POST', 405);
      return true;
    }
    await engine.delay();

    const header = req.headers['x-jito-auth'];
    const uuid = (typeof header === 'string' && header) || url.searchParams.get('uuid') || undefined;
    const admission = engine.admit(clientIp(req), uuid, true, region);
    if (!admission.ok) {
      await readBody(req).catch(() => undefined);
      if (admission.kind === 'unavailable') sendText(res, 503, admission.message);
      else
        rpcError(res, null, -32097, admission.message, 429, {
          'retry-after': Math.ceil(admission.retryAfterMs / 1000),
        });
      return true;
    }

    let body: Buffer;
    try {
      body = await readBody(req);
    } catch {
      rpcError(res, null, -32600, 'Invalid request: body too large', 413);
      return true;
    }
    if (!isJsonContentType(req)) {
      rpcError(res, null, -32600, 'Invalid content type');
      return true;
    }
    let request: { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
    try {
      request = JSON.parse(body.toString('utf8'));
    } catch {
      rpcError(res, null, -32700, 'Parse error');
      return true;
    }
    if (!request || typeof request !== 'object' || Array.isArray(request)) {
      rpcError(res, null, -32600, 'Invalid request');
      return true;
    }
    const id: JsonRpcId =
      typeof request.id === 'string' || typeof request.id === 'number' ? request.id : null;
    if (typeof request.method !== 'string' || !methods.includes(request.method)) {
      rpcError(res, id, -32601, 'Method not found');
      return true;
    }
    const params = request.params === undefined ? [] : request.params;
    if (!Array.isArray(params)) {
      rpcError(res, id, -32602, 'Invalid params: expected an array');
      return true;
    }
    try {
      const headers: Record<string, string> = {};
      const result = dispatch(engine, region, request.method, params, url, headers);
      sendJson(res, 200, { jsonrpc: '2.0', result, id }, headers);
    } catch (error) {
      if (error instanceof RpcError) rpcError(res, id, error.code, error.message, error.httpStatus);
      else throw error;
    }
    return true;
  };
}

function dispatch(
  engine: BlockEngine,
  region: string,
  method: string,
  params: unknown[],
  url: URL,
  headers: Record<string, string>,
): unknown {
  switch (method) {
    case 'getTipAccounts':
      return [...engine.tipAccounts];
    case 'sendBundle': {
      const transactions = stringArray(params[0], 'transactions');
      const outcome = engine.submitBundle(transactions, parseEncoding(params[1]), region);
      if (!outcome.ok) throw new RpcError(outcome.error.code, outcome.error.message);
      return outcome.bundleId;
    }
    case 'getBundleStatuses':
      return engine.bundleStatuses(statusIds(params));
    case 'getInflightBundleStatuses':
      return engine.inflightStatuses(statusIds(params));
    case 'sendTransaction': {
      if (typeof params[0] !== 'string')
        throw new RpcError(-32602, 'Invalid params: expected a transaction string');
      const encoding = parseEncoding(params[1]);
      if (url.searchParams.get('bundleOnly') === 'true') {
        const outcome = engine.submitBundle([params[0]], encoding, region);
        if (!outcome.ok) throw new RpcError(outcome.error.code, outcome.error.message);
        headers['x-bundle-id'] = outcome.bundleId;
        const bundle = engine.getBundle(outcome.bundleId);
        return bundle?.signatures[0];
      }
      const wire = decodeWire(params[0], encoding);
      let signature: string;
      try {
        if (!wire) throw new Error('undecodable');
        signature = parseTransaction(wire, new Set()).signatures[0] as string;
      } catch {
        throw new RpcError(-32602, BundleErrors.undecodable(0));
      }
      // Jito forces skip_preflight: only what the chain refuses outright comes back as an error.
      const submitted = engine.cluster.submitTransaction(wire);
      if (!submitted.ok) {
        throw new RpcError(-32002, `Transaction ${signature} rejected: ${JSON.stringify(submitted.err)}`);
      }
      return submitted.signature;
    }
    default:
      throw new RpcError(-32601, 'Method not found');
  }
}
