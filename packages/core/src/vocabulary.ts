/** Small closed vocabularies shared by the API, events, policy and decisions. */

/** Transaction priorities. */
export const PRIORITIES = ['low', 'normal', 'high'] as const;
/** A transaction priority. */
export type Priority = (typeof PRIORITIES)[number];

/** How a transaction is tipped: relay adds a tip transaction (`auto`) or the caller tipped inside its own (`included`). */
export const TIP_MODES = ['auto', 'included'] as const;
/** A tip mode. */
export type TipMode = (typeof TIP_MODES)[number];

/** Decision tiers. */
export const DECISION_MODES = ['cortex', 'reflex'] as const;
/** A decision tier. */
export type DecisionMode = (typeof DECISION_MODES)[number];

/** Tip-floor statistics a policy may target. */
export const TIP_PERCENTILES = ['p25', 'p50', 'p75', 'p95', 'p99', 'ema'] as const;
/** A tip-floor statistic name. */
export type TipPercentile = (typeof TIP_PERCENTILES)[number];

/** Transaction encodings accepted at enqueue. */
export const TX_ENCODINGS = ['base64', 'base58'] as const;
/** A transaction encoding. */
export type TxEncoding = (typeof TX_ENCODINGS)[number];

/** Solana's blockhash lifetime in blocks: no transaction can land after it. */
export const BLOCKHASH_LIFETIME_SLOTS = 150;

/** Jito's minimum tip in lamports. */
export const JITO_MIN_TIP_LAMPORTS = 1_000;
