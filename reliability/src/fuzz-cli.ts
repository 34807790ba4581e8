import { runCli, type CliContext } from '@solrelay/cli';

/** One in-process run of the `relay` CLI: what bin.ts does, minus process.exit. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `relay <argv>` in this process with the given environment and working directory. */
export async function runCliInProcess(
  argv: string[],
  env: Record<string, string | undefined>,
  cwd: string,
): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const ctx: CliContext = {
    env,
    cwd,
    io: {
      stdout: (text) => {
        stdout += text;
      },
      stderr: (text) => {
        stderr += text;
      },
    },
    color: false,
  };
  const code = await runCli(argv, ctx);
  return { code, stdout, stderr };
}

/** A stack trace or the CLI's own "this is a bug" banner in its output. */
export function looksLikeACrash(run: CliRun): string | null {
  const all = `${run.stdout}\n${run.stderr}`;
  if (/unexpected error \(a bug/.test(all)) return 'the CLI reported an unexpected error (a bug)';
  if (/\n\s+at .+(\(|:\d+:\d+)/.test(all)) return 'a stack trace';
  if (/\[object Object\]/.test(all)) return '[object Object] in the output';
  return null;
}
