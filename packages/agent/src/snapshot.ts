import type { ContentionClass, Policy, ReflexDecision, TipFloor } from '@solrelay/core';

/**
 * The JSON the model reads as the user message (simnet README "LLM endpoint convention"): the transaction, the tip
 * floor, the policy, the previous attempt, the leader outlook, and what reflex would do, so the model decides with
 * the same facts and the deterministic answer as a reference point.
 */
export interface DecisionSnapshot {
  tx_id: string;
  priority: string;
  tip_mode: 'auto' | 'included';
  tip_floor: TipFloor;
  policy: Policy;
  previous_attempt?: { tip_lamports: number; outcome: string; compute_units?: number | null };
  leader?: {
    identity?: string;
    bundle_engine: boolean | null;
    next_bundle_engine_leader_slot: number | null;
  };
  slot: number;
  expires_at_slot: number;
  retries: number;
  /** The caller's cap from enqueue, when set. */
  max_tip?: number;
  /**
   * The bundle's requested CU (user transactions plus relay's tip transaction at most), when the sidecar counted it:
   * Jito ranks bundles by tip per requested CU among bundles whose write sets intersect (DESIGN §11).
   */
  compute_units?: number;
  /**
   * The contention of the bundle's write set (with `compute_units`): `unknown` when the sidecar had no reading (priced
   * as contended); the write set's recent price of write access in micro-lamports per CU, null without a reading.
   */
  contention?: { class: ContentionClass; write_price_micro_lamports: number | null };
  /** The tip range the sidecar will accept for this attempt. */
  allowed_tip: { min: number; max: number };
  reflex: {
    action: ReflexDecision['action'];
    tip_lamports?: number;
    /** How reflex priced its tip per requested CU, when it did (lamports per CU; the signal in words). */
    pricing?: { tip_per_cu: number; bid_per_cu: number; signal: string };
    reason: string;
    hard_reasons: string[];
  };
}
