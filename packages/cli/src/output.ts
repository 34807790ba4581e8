import Table from 'cli-table3';

/**
 * Where a command's words go. Human output goes to stdout; logs, progress under `--json`, warnings and errors go
 * to stderr, so `--json` leaves exactly one JSON document on stdout.
 */
export interface Io {
  stdout(text: string): void;
  stderr(text: string): void;
}

/** Everything a command may read of its surroundings; only the entry point builds it from `process`. */
export interface CliContext {
  env: Record<string, string | undefined>;
  cwd: string;
  io: Io;
  /** Colour only on a terminal and never when `NO_COLOR` is set (https://no-color.org). */
  color: boolean;
}

/** What a finished command hands to the entry point to render. */
export interface CommandResult {
  /** The JSON document printed under `--json`. */
  data?: unknown;
  /** The human rendering printed without `--json`. */
  text?: string;
  /** Exit code when the command produced output and still failed (a policy with contradictions). Default 0. */
  exitCode?: number;
}

export function colorEnabled(env: Record<string, string | undefined>, isTty: boolean): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  return isTty;
}

const CODES = {
  bold: [1, 22],
  dim: [2, 22],
  red: [31, 39],
  green: [32, 39],
  yellow: [33, 39],
  cyan: [36, 39],
};
export type Style = keyof typeof CODES;

/** Wraps `text` in an ANSI style when colour is on. */
export function paint(color: boolean, style: Style, text: string): string {
  if (!color) return text;
  const [open, close] = CODES[style];
  return `\u001b[${open}m${text}\u001b[${close}m`;
}

/** Boxed, without a rule between every row. */
const COMPACT = { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' };

/** A boxed two-column table of labelled values (`relay status`, `relay tip`). */
export function keyValueTable(rows: Array<[string, string]>, color: boolean): string {
  const table = new Table({ chars: COMPACT, style: { head: [], border: color ? ['grey'] : [] } });
  for (const [key, value] of rows) table.push({ [paint(color, 'bold', key)]: value });
  return table.toString();
}

/** A boxed table with a header row (`relay lifecycle`, `relay policy show`). */
export function gridTable(head: string[], rows: string[][], color: boolean): string {
  const table = new Table({
    head: head.map((h) => paint(color, 'bold', h)),
    chars: COMPACT,
    style: { head: [], border: color ? ['grey'] : [] },
  });
  for (const row of rows) table.push(row);
  return table.toString();
}

/** Lamports with thousands separators, so 2000000 reads as 2,000,000. */
export function lamports(n: number | null | undefined): string {
  return n === null || n === undefined ? '-' : n.toLocaleString('en-US');
}

export function yesNo(value: boolean | null | undefined): string {
  return value === null || value === undefined ? 'unknown' : value ? 'yes' : 'no';
}
