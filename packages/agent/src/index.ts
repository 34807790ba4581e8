/**
 * @solrelay/agent: relay's decision layer. Presence, the reflex and cortex tiers, and the watchdog; it talks to the
 * sidecar only through @solrelay/client.
 */
export { RelayAgent, AGENT_DEFAULTS } from './agent';
export type { RelayAgentOptions } from './agent';
export { isTokenRefusal } from './sidecar-errors';
export type { SubmitRecord } from './submit';
export type { AgentDecisionTrace } from './trace';
export { trackedFromRecord } from './watchdog';
export { createRelayAgent, cortexConfigured } from './create';
export type { CreateRelayAgentOptions, CreatedRelayAgent } from './create';
export {
  AnthropicDecisionModel,
  DECISION_SYSTEM_PROMPT,
  DECISION_TOOL,
  DECISION_TOOL_NAME,
  DEFAULT_AGENT_MODEL,
  classifyModelError,
} from './anthropic-model';
export type { AnthropicDecisionModelOptions } from './anthropic-model';
export { SsePresence } from './presence';
export type { SsePresenceOptions } from './presence';
export {
  allowedTipRange,
  buildSnapshot,
  checkModelAnswer,
  chooseTier,
  leaderViewFromSlotUpdate,
  reflexFor,
  violationOf,
} from './decision';
export type {
  AnswerProblem,
  CheckedAnswer,
  DecisionWorld,
  TierChoice,
  TrackedStatus,
  TrackedTx,
} from './decision';
export type { DecisionSnapshot } from './snapshot';
export { ConcurrencyLimiter } from './limiter';
export type { LimitedRun } from './limiter';
export type {
  AgentLog,
  AgentRelayClient,
  Clock,
  DecisionModel,
  IntervalTimers,
  ModelFailureReason,
  ModelResult,
  ModelUsage,
  PresenceChannel,
  PresenceHandlers,
  PresenceRegistration,
} from './ports';
