import { sendAnswer, type BlockEngineTransport, type SendBundleResult } from './block-engine';
import { GrpcBlockEngine } from './block-engine-grpc';
import { JsonRpcBlockEngine } from './block-engine-jsonrpc';
import type { EngineBinding } from './local-address';

/** One regional block engine: where bundles go (JSON-RPC or gRPC) and its gRPC face for regions and leaders. */
/**
 * Share of a region's budget relay spends. The engine counts requests as they arrive and relay as they leave: two
 * sends a second apart can arrive less than a second apart, and the 429 that follows costs that region a second. A
 * 10 % margin keeps relay's own sends from being refused (the end-to-end benchmark measured 7–30 % of them refused
 * at the full budget). The send queue paces by it and admission counts by it.
 */
export const SEND_PACING = 0.9;

export interface EngineRegion {
  /**
   * The region's name as the engine calls it (`GetRegions`' `current_region`), until then the host's first label
   * (`amsterdam` of `amsterdam.mainnet.block-engine.jito.wtf`) or `region-N`.
   */
  name: string;
  /** The JSON-RPC base URL or gRPC URL bundles go to (what /status shows). */
  readonly url: string;
  readonly transport: BlockEngineTransport;
  readonly grpc: GrpcBlockEngine;
  /** Whether `grpc` is this region's own address (paired by position), so its GetRegions names this region. */
  readonly ownGrpc: boolean;
  /** What its sends came to: an id back, a verdict, a transport failure. */
  readonly answers: { accepted: number; rejected: number; transport: number };
}

export interface EngineRegionsConfig {
  bundleEngineUrls: readonly string[];
  bundleEngineGrpcUrls: readonly string[];
  bundleEngineTransport: 'jsonrpc' | 'grpc';
  bundleEngineUuid: string | undefined;
}

/** Region -> bundle-engine validator identity -> its leader slots, as `GetConnectedLeadersRegioned` reports them. */
export type RegionedLeaders = Record<string, Record<string, number[]>>;

/** identity -> the region it is connected to. */
export function leaderRegions(leaders: RegionedLeaders): Map<string, string> {
  const out = new Map<string, string>();
  for (const [region, byIdentity] of Object.entries(leaders))
    for (const identity of Object.keys(byIdentity)) out.set(identity, region);
  return out;
}

function hostLabel(url: string, index: number): string {
  try {
    const host = new URL(url).hostname;
    const label = host.split('.')[0] ?? '';
    // An IP address or the global `mainnet` router names no region.
    if (
      /^[a-z][a-z0-9-]*$/i.test(label) &&
      label !== 'mainnet' &&
      label !== 'localhost' &&
      host.includes('.')
    )
      return label.toLowerCase();
  } catch {
    /* fall through */
  }
  return `region-${index + 1}`;
}

/**
 * Every regional block engine relay sends to. Mainnet gives one IP one request a second per region, and a bundle
 * reaches its leader fastest through the region that leader is connected to, so relay holds one address per region
 * (BUNDLE_ENGINE_URL / BUNDLE_ENGINE_GRPC_URL, comma-separated, paired by position) and the send queue spends each
 * region's budget separately. A single address is a one-region list.
 */
export class EngineRegions {
  readonly regions: EngineRegion[];
  /** Every region the engines say is online (GetRegions' available_regions), once any has answered. */
  private available: string[] = [];
  /** Every address that can name its region has (and the regions online are known): no need to ask again. */
  namesResolved = false;

  constructor(regions: EngineRegion[]) {
    if (regions.length === 0) throw new Error('at least one block engine address is needed');
    this.regions = regions;
  }

  /**
   * Build the regions of a config: bundles over JSON-RPC (default) or gRPC; gRPC for regions, leaders, results.
   * With a `binding` (RELAY_ENGINE_LOCAL_ADDRESS), every one of their connections goes out from its local address:
   * JSON-RPC through its fetch, gRPC through its forwarders.
   */
  static fromConfig(config: EngineRegionsConfig, binding?: EngineBinding): EngineRegions {
    const { bundleEngineUrls: jsonUrls, bundleEngineGrpcUrls: grpcUrls } = config;
    const count = config.bundleEngineTransport === 'grpc' ? grpcUrls.length : jsonUrls.length;
    const regions: EngineRegion[] = [];
    for (let i = 0; i < count; i++) {
      // Lists of equal length pair up by position; a single gRPC address serves leader data for every region.
      const grpcUrl = (grpcUrls.length === count ? grpcUrls[i] : grpcUrls[0]) as string;
      const grpc = new GrpcBlockEngine(grpcUrl, binding ? { via: binding.grpcVia(grpcUrl) } : {});
      const url = config.bundleEngineTransport === 'grpc' ? grpcUrl : (jsonUrls[i] as string);
      const transport =
        config.bundleEngineTransport === 'grpc'
          ? grpc
          : new JsonRpcBlockEngine({
              baseUrl: url,
              uuid: config.bundleEngineUuid,
              ...(binding ? { fetch: binding.fetch } : {}),
            });
      regions.push({
        name: hostLabel(url, i),
        url,
        transport,
        grpc,
        ownGrpc: config.bundleEngineTransport === 'grpc' || grpcUrls.length === count,
        answers: { accepted: 0, rejected: 0, transport: 0 },
      });
    }
    return new EngineRegions(regions);
  }

  get size(): number {
    return this.regions.length;
  }

  get names(): string[] {
    return this.regions.map((r) => r.name);
  }

  /** Position of the region named `name`, or null. */
  indexOf(name: string | null): number | null {
    if (name === null) return null;
    const index = this.regions.findIndex((r) => r.name === name);
    return index < 0 ? null : index;
  }

  async sendBundle(transactions: Uint8Array[], region: number): Promise<SendBundleResult> {
    const target = this.regions[region] ?? (this.regions[0] as EngineRegion);
    const result = await target.transport.sendBundle(transactions);
    target.answers[sendAnswer(result)] += 1;
    return result;
  }

  /** Tip accounts from the first region that answers (they are the same in every region). */
  async getTipAccounts(): Promise<string[]> {
    let last: unknown = null;
    for (const region of this.regions) {
      try {
        return await region.transport.getTipAccounts();
      } catch (error) {
        last = error;
      }
    }
    throw last instanceof Error ? last : new Error('no block engine region answered getTipAccounts');
  }

  /**
   * Learn each address's region name from `GetRegions` (free of the send budget). An address that does not answer
   * keeps the name it had; two addresses claiming one region keep theirs apart by position.
   */
  async resolveNames(): Promise<void> {
    // A gRPC address shared by several regions names only its own: the others keep their host names.
    const asked = this.regions.filter((r, i) => r.ownGrpc || i === 0);
    const answers = await Promise.allSettled(asked.map((r) => r.grpc.getRegions()));
    const taken = new Set<string>();
    const available = new Set<string>();
    answers.forEach((answer, i) => {
      const region = asked[i] as EngineRegion;
      if (answer.status !== 'fulfilled') return;
      for (const name of answer.value.availableRegions) available.add(name);
      const name = answer.value.currentRegion;
      if (!region.ownGrpc || !name || taken.has(name)) return;
      taken.add(name);
      region.name = name;
    });
    if (available.size > 0) this.available = [...available];
    this.namesResolved = available.size > 0 && answers.every((answer) => answer.status === 'fulfilled');
  }

  /** The regions whose leaders relay reads: every region online (once known), else the configured ones. */
  get leaderRegions(): string[] {
    return this.available.length > 0 ? [...this.available] : this.names;
  }

  /**
   * Which validators run the bundle engine, in every region online (not only the configured ones: a leader connected
   * to a region relay does not send to still lands bundles, forwarded), and the region each is connected to: one
   * `GetConnectedLeadersRegioned` asking for all regions, from the first address that answers. Throws when none
   * does, or when the answer leaves out a region asked for (its leaders would be taken for none).
   */
  async connectedLeaders(): Promise<RegionedLeaders> {
    let last: unknown = null;
    const seen = new Set<GrpcBlockEngine>();
    for (const region of this.regions) {
      if (seen.has(region.grpc)) continue;
      seen.add(region.grpc);
      try {
        const asked = this.leaderRegions;
        const answer = await region.grpc.getConnectedLeadersRegioned(asked);
        const missing = asked.filter((name) => !(name in answer));
        if (missing.length > 0) throw new Error(`no leader data for region ${missing.join(', ')}`);
        return answer;
      } catch (error) {
        last = error;
      }
    }
    throw last instanceof Error ? last : new Error('no block engine region answered for its leaders');
  }

  close(): void {
    const closed = new Set<unknown>();
    for (const region of this.regions) {
      for (const client of [region.transport, region.grpc]) {
        if (closed.has(client)) continue;
        closed.add(client);
        client.close();
      }
    }
  }
}
