/**
 * @solrelay/cli: the `relay` binary. The programmatic API runs the same commands with a given context (tests,
 * wrappers) and exposes the exit-code contract.
 */
export { runCli } from './main';
export { parseArgs, type ParsedArgs, type CommandRunner } from './cli';
export { EXIT_CODES, ExitError, isExitError, usageError, type ExitCode } from './errors';
export { colorEnabled, type CliContext, type CommandResult, type Io } from './output';
export { AGENT_PREFIX } from './runtime/run-sidecar';
export { DEMO_PREFIX } from './runtime/demo-traffic';
