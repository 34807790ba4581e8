import type { Policy, ReflexDecision, TipFloor } from '@solrelay/core';

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
  previous_attempt?: { tip_lamports: number; outcome: string };
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
  /** The tip range the sidecar will accept for this attempt. */
  allowed_tip: { min: number; max: number };
  reflex: { action: ReflexDecision['action']; tip_lamports?: number; reason: string; hard_reasons: string[] };
}
