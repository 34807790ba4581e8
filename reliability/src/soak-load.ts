import { request, Agent } from 'node:http';
import type { TransferFactory } from './soak-wire';

/** One enqueue's outcome as the caller saw it. */
export interface EnqueueResult {
  status: number;
  txId: string | null;
  /** The user transactions' first signatures, from the answer. */
  signatures: string[];
  code: string | null;
  /** Milliseconds from send to the answer (performance.now clock). */
  latencyMs: number;
  /** performance.now() when the request was sent. */
  sentAt: number;
}

/**
 * A keep-alive HTTP client for POST /tx/enqueue: plain node:http with a bounded socket pool, so a load generator
 * costs little next to the sidecar it loads and never opens a connection per request.
 */
export class EnqueueClient {
  private readonly agent: Agent;
  private readonly host: string;
  private readonly port: number;

  constructor(
    baseUrl: string,
    private readonly headers: Record<string, string> = {},
    maxSockets = 64,
  ) {
    const url = new URL(baseUrl);
    this.host = url.hostname;
    this.port = Number(url.port);
    this.agent = new Agent({ keepAlive: true, maxSockets });
  }

  enqueue(transactions: string[]): Promise<EnqueueResult> {
    const body = JSON.stringify(
      transactions.length === 1 ? { transaction: transactions[0] } : { transactions },
    );
    const sentAt = performance.now();
    return new Promise((resolve) => {
      const done = (status: number, text: string) => {
        let json: { tx_id?: string; signatures?: string[]; error?: { code?: string } } = {};
        try {
          json = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        resolve({
          status,
          txId: json.tx_id ?? null,
          signatures: json.signatures ?? [],
          code: json.error?.code ?? null,
          latencyMs: performance.now() - sentAt,
          sentAt,
        });
      };
      const req = request(
        {
          host: this.host,
          port: this.port,
          method: 'POST',
          path: '/tx/enqueue',
          agent: this.agent,
          headers: {
            ...this.headers,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => done(res.statusCode ?? 0, text));
          res.on('error', (error) => done(-1, error.message));
        },
      );
      req.setTimeout(60_000, () => req.destroy(new Error('timeout')));
      req.on('error', (error) =>
        done(-1, JSON.stringify({ error: { code: `transport: ${error.message}` } })),
      );
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Closed loop: `concurrency` workers each sending one enqueue after another until `stop()` says so. */
export async function closedLoop(options: {
  client: EnqueueClient;
  factory: TransferFactory;
  transactionsPerEnqueue: number;
  concurrency: number;
  stop: () => boolean;
  onResult?: (result: EnqueueResult) => void;
}): Promise<EnqueueResult[]> {
  const results: EnqueueResult[] = [];
  const worker = async () => {
    while (!options.stop()) {
      const txs = Array.from({ length: options.transactionsPerEnqueue }, () => options.factory.transfer());
      const result = await options.client.enqueue(txs);
      results.push(result);
      options.onResult?.(result);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  return results;
}

/**
 * Open loop at a fixed rate: a request every 1/rate s whether or not earlier ones have answered (a slow sidecar
 * shows as latency and a backlog, not as a slower offered rate). `maxInFlight` bounds the generator's own memory;
 * sends skipped at that bound are counted, never silently dropped.
 */
export async function openLoop(options: {
  client: EnqueueClient;
  factory: TransferFactory;
  ratePerSecond: number;
  durationMs: number;
  maxInFlight: number;
  onResult: (result: EnqueueResult) => void;
}): Promise<{ sent: number; skipped: number }> {
  const start = performance.now();
  const interval = 1000 / options.ratePerSecond;
  const total = Math.floor((options.durationMs / 1000) * options.ratePerSecond);
  let sent = 0;
  let skipped = 0;
  let inFlight = 0;
  const pending = new Set<Promise<void>>();
  for (let i = 0; i < total; i++) {
    const due = start + i * interval;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    if (inFlight >= options.maxInFlight) {
      skipped++;
      continue;
    }
    inFlight++;
    sent++;
    const p: Promise<void> = options.client.enqueue([options.factory.transfer()]).then((result) => {
      inFlight--;
      pending.delete(p);
      options.onResult(result);
    });
    pending.add(p);
  }
  await Promise.all(pending);
  return { sent, skipped };
}

/** One metric's value from a Prometheus text exposition (the first sample of that name), or null. */
export function metricValue(text: string, name: string): number | null {
  const match = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm').exec(text);
  return match ? Number(match[1]) : null;
}

/** The sum of every sample of one metric (all label sets), or null when there is none. */
export function metricSum(text: string, name: string): number | null {
  const matches = [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'gm'))];
  return matches.length === 0 ? null : matches.reduce((sum, m) => sum + Number(m[1]), 0);
}
