/**
 * The simulated model's judgement: a deterministic rule over the agent's JSON snapshot, so the cortex tier runs
 * offline and tests can predict its answer. Convention (README "LLM endpoint convention"): the tool is
 * `decide_submission` with input `{ action: "submit" | "hold", tip_lamports, rationale }`; the user message is the
 * snapshot `{ tx_id, priority, tip_floor, policy, previous_attempt?, leader?, slot }`.
 */

export const DECISION_TOOL = 'decide_submission';
export const SIMNET_PREFIX = '[simnet]';

export type Percentile = 'p25' | 'p50' | 'p75' | 'p95' | 'p99' | 'ema';
const PERCENTILES: readonly Percentile[] = ['p25', 'p50', 'p75', 'p95', 'p99', 'ema'];

export interface DecisionSnapshot {
  tx_id?: string;
  priority?: string;
  tip_floor?: Partial<Record<Percentile, number>> & { stale?: boolean };
  policy?: Record<string, unknown>;
  previous_attempt?: { tip_lamports?: number; outcome?: string } | null;
  leader?: {
    identity?: string;
    bundle_engine?: boolean;
    next_bundle_engine_leader_slot?: number | null;
  } | null;
  slot?: number;
  max_tip?: number;
}

export interface Decision {
  action: 'submit' | 'hold';
  tip_lamports: number;
  rationale: string;
}

const DEFAULT_MIN_TIP = 1_000;
const DEFAULT_MAX_TIP = 2_000_000;
const DEFAULT_STEP = 50_000;
/** Submit only when a bundle-engine leader is this close (DESIGN §6's reflex timing). */
const LEADER_SLACK_SLOTS = 2;

function num(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}

/** Parse the snapshot out of the user message text; tolerant of prose around the JSON. */
export function parseSnapshot(text: string): DecisionSnapshot | null {
  const attempts = [text, text.slice(text.indexOf('{'), text.lastIndexOf('}') + 1)];
  for (const candidate of attempts) {
    try {
      const value: unknown = JSON.parse(candidate);
      if (value && typeof value === 'object' && !Array.isArray(value)) return value as DecisionSnapshot;
    } catch {
      // try the next form
    }
  }
  return null;
}

/**
 * Floor at the policy percentile; after `fee_too_low` the previous tip plus the escalation step; after `dropped`
 * the same tip; always within [min-tip, min(max-tip, the caller's max_tip)]. Hold while no bundle-engine leader is
 * within two slots. The rationale is one sentence.
 */
export function decideSubmission(snapshot: DecisionSnapshot | null): Decision {
  if (!snapshot) {
    return {
      action: 'hold',
      tip_lamports: DEFAULT_MIN_TIP,
      rationale: `${SIMNET_PREFIX} Holding because the snapshot was not valid JSON.`,
    };
  }
  const policy = snapshot.policy ?? {};
  const floor = snapshot.tip_floor ?? {};
  const percentileKey = String(policy['tip-percentile'] ?? 'p75') as Percentile;
  const percentile = PERCENTILES.includes(percentileKey) ? percentileKey : 'p75';
  const minTip = num(policy['min-tip'], DEFAULT_MIN_TIP);
  const maxTip = Math.min(num(policy['max-tip'], DEFAULT_MAX_TIP), num(snapshot.max_tip, Infinity));
  const step = num(policy['escalation-step'], DEFAULT_STEP);
  const floorTip = num(floor[percentile], num(floor.p50, 10_000));
  const previous = snapshot.previous_attempt ?? null;
  const previousTip = previous ? num(previous.tip_lamports, floorTip) : null;

  let tip: number;
  let why: string;
  if (previous && previousTip !== null && previous.outcome === 'fee_too_low') {
    tip = previousTip + step;
    why = `the last tip of ${previousTip} lost the auction, so it rises by the ${step}-lamport escalation step`;
  } else if (previous && previousTip !== null && previous.outcome === 'dropped') {
    tip = previousTip;
    why = `the last attempt was dropped rather than outbid, so the tip stays at ${previousTip}`;
  } else if (floor.stale) {
    tip = Math.max(floorTip, previousTip ?? 0);
    why = `tip data is stale, so it keeps the last ${percentile} floor of ${floorTip}`;
  } else {
    tip = floorTip;
    why = `it bids the ${percentile} tip floor of ${floorTip}`;
  }
  const capped = tip > maxTip;
  tip = Math.round(Math.min(Math.max(tip, minTip), maxTip));
  if (capped) why += `, capped at max-tip ${maxTip}`;

  const leader = snapshot.leader;
  const slot = num(snapshot.slot, NaN);
  const nextLeader = leader?.next_bundle_engine_leader_slot;
  const leaderFar =
    leader?.bundle_engine === false &&
    (typeof nextLeader !== 'number' || !Number.isFinite(slot) || nextLeader - slot > LEADER_SLACK_SLOTS);
  if (leaderFar) {
    return {
      action: 'hold',
      tip_lamports: tip,
      rationale: `${SIMNET_PREFIX} Hold: no bundle-engine leader within ${LEADER_SLACK_SLOTS} slots, and when one comes ${why}.`,
    };
  }
  return { action: 'submit', tip_lamports: tip, rationale: `${SIMNET_PREFIX} Submit: ${why}.` };
}

type JsonSchema = {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  default?: unknown;
  minimum?: number;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
};

/** A plausible value for a JSON schema: its const, default or first enum value, else a typed placeholder. */
export function sampleFromSchema(schema: JsonSchema | undefined, name = 'value'): unknown {
  if (!schema) return null;
  if (schema.const !== undefined) return schema.const;
  if (schema.default !== undefined) return schema.default;
  if (schema.enum && schema.enum.length > 0) return schema.enum[0];
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
  switch (type) {
    case 'string':
      return `${SIMNET_PREFIX} ${name}`;
    case 'integer':
      return Math.ceil(schema.minimum ?? 0);
    case 'number':
      return schema.minimum ?? 0;
    case 'boolean':
      return false;
    case 'array':
      return [];
    case 'object':
    case undefined: {
      const out: Record<string, unknown> = {};
      for (const key of schema.required ?? []) out[key] = sampleFromSchema(schema.properties?.[key], key);
      return out;
    }
    default:
      return null;
  }
}
