export {
  SimLlm,
  MALFORMED_VARIANTS,
  parseScriptStep,
  type LlmScriptStep,
  type MalformedVariant,
  type RecordedLlmRequest,
  type SimLlmOptions,
} from './llm';
export {
  DECISION_TOOL,
  SIMNET_PREFIX,
  decideSubmission,
  parseSnapshot,
  sampleFromSchema,
  type Decision,
  type DecisionSnapshot,
  type Percentile,
} from './heuristic';
