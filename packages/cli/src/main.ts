import { parseArgs } from './cli';
import { EXIT_CODES, isExitError } from './errors';
import { paint, type CliContext } from './output';

/**
 * The one place that runs a command and renders its outcome; it returns the exit code and `bin.ts` exits with it.
 * Under `--json` stdout gets exactly one JSON document: the result, or `{"error": ...}` when the command failed.
 */
export async function runCli(argv: string[], ctx: CliContext): Promise<number> {
  let json = argv.includes('--json');
  try {
    const parsed = await parseArgs(argv);
    if (parsed.kind === 'print') {
      ctx.io.stdout(`${parsed.output}\n`);
      return EXIT_CODES.ok;
    }
    json = parsed.json;
    const result = await parsed.run(ctx);
    if (json && result.data !== undefined) ctx.io.stdout(`${JSON.stringify(result.data, null, 2)}\n`);
    else if (!json && result.text !== undefined) ctx.io.stdout(`${result.text}\n`);
    return result.exitCode ?? EXIT_CODES.ok;
  } catch (error) {
    if (isExitError(error)) {
      const lines = [
        `${paint(ctx.color, 'red', 'relay:')} ${error.message}`,
        ...error.details.map((line) => `  ${line}`),
        ...(error.hint ? [`${paint(ctx.color, 'dim', 'hint:')} ${error.hint}`] : []),
      ];
      ctx.io.stderr(`${lines.join('\n')}\n`);
      if (json) {
        const body = {
          exit_code: error.code,
          message: error.message,
          details: error.details,
          hint: error.hint ?? null,
        };
        ctx.io.stdout(`${JSON.stringify({ error: body }, null, 2)}\n`);
      }
      return error.code;
    }
    // Not an expected failure: a bug. Print all there is to report it.
    ctx.io.stderr(
      `relay: unexpected error (a bug; please report it):\n${(error as Error).stack ?? String(error)}\n`,
    );
    if (json)
      ctx.io.stdout(
        `${JSON.stringify({ error: { exit_code: 1, message: String((error as Error).message ?? error) } })}\n`,
      );
    return EXIT_CODES.failure;
  }
}
