/**
 * The agent process: the one place that reads the environment. It builds @solrelay/agent from it, writes one plain
 * line per event to stdout (errors to stderr; `relay up` / `relay agent` prefix them with `[ AGENT ]`), and stops
 * cleanly on SIGINT / SIGTERM.
 */
import { AGENT_DEFAULTS, createRelayAgent, isTokenRefusal } from '@solrelay/agent';

/**
 * Lines written once per event-loop turn. process.stdout and stderr are synchronous on a file and on a pipe's
 * first try (Node on Linux), and the agent logs a few lines for every transaction: a write per line put that many
 * syscalls on the decision path (13 % of the agent's CPU at 50 tx/s in the decision-latency benchmark). Lines of one
 * turn now go out together. One queue for both streams keeps their order: an error line first writes every line
 * logged before it, then itself at once (errors are rare, and a reader merging both streams sees them in place).
 */
class TurnLog {
  private lines: string[] = [];
  private scheduled = false;

  // Arrow properties: the agent may hold these functions apart from the object.
  readonly line = (text: string): void => {
    this.lines.push(text);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  };

  readonly error = (text: string): void => {
    this.flush();
    process.stderr.write(`${text}\n`);
  };

  flush(): void {
    this.scheduled = false;
    if (this.lines.length === 0) return;
    const text = `${this.lines.join('\n')}\n`;
    this.lines = [];
    process.stdout.write(text);
  }
}

/** A positive integer from the environment, or the default; a bad value stops start-up with one clear line. */
function positiveInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new Error(`${name} must be a positive integer (got "${raw}")`);
  }
  return value;
}

function main(): void {
  const env = process.env;
  const relayUrl = env.RELAY_URL || `http://127.0.0.1:${env.API_PORT || '7777'}`;
  const log = new TurnLog();
  // What a turn logged is written before the process ends by exit() or a return ('exit' handlers run then; a crash
  // by signal loses at most the current turn's lines).
  process.on('exit', () => log.flush());
  const { agent, close } = createRelayAgent({
    relayUrl,
    ...(env.RELAY_API_TOKEN ? { token: env.RELAY_API_TOKEN } : {}),
    ...(env.ANTHROPIC_API_KEY ? { anthropicApiKey: env.ANTHROPIC_API_KEY } : {}),
    ...(env.ANTHROPIC_BASE_URL ? { anthropicBaseUrl: env.ANTHROPIC_BASE_URL } : {}),
    ...(env.AGENT_MODEL ? { model: env.AGENT_MODEL } : {}),
    cortexDeadlineMs: positiveInt(env, 'AGENT_CORTEX_DEADLINE_MS', AGENT_DEFAULTS.cortexDeadlineMs),
    escalationDeadlineMs: positiveInt(
      env,
      'AGENT_ESCALATION_DEADLINE_MS',
      AGENT_DEFAULTS.escalationDeadlineMs,
    ),
    watchdogMs: positiveInt(env, 'AGENT_WATCHDOG_MS', AGENT_DEFAULTS.watchdogMs),
    log,
    // A refused token cannot heal by retrying: the agent has stopped itself, so the process ends too.
    onUnauthorized: (error) => fail(error),
  });
  log.line(`starting relay=${relayUrl}`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.line(`stopping (${signal})`);
    close();
    process.exit(0);
  };
  /** Exit non-zero with one line; a 401 says plainly that the token is the problem. */
  function fail(error: unknown): void {
    if (stopping) return;
    stopping = true;
    close();
    log.flush();
    process.stderr.write(
      isTokenRefusal(error)
        ? `agent: the sidecar refused the token (${error.code})\n`
        : `agent stopped: ${error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exit(1);
  }
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  agent.start().catch(fail);
}

try {
  main();
} catch (error) {
  process.stderr.write(
    `relay agent: cannot start: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
}
