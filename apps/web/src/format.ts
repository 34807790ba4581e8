// Small, pure formatters shared by the panels. Everything the operator reads goes through here so
// numbers look the same everywhere (grouped digits, lamports with SOL beside them, short ids).

const integerFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

/** 1234567 -> "1,234,567". */
export function formatInteger(value: number | null | undefined): string {
  return value === null || value === undefined || !Number.isFinite(value) ? '—' : integerFormat.format(value);
}

/** Lamports in a compact form for dense tables: 950 / 12.5k / 1.25M. */
export function formatLamportsCompact(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '—';
  const abs = Math.abs(value);
  if (abs >= 1_000_000_000) return `${trimFixed(value / 1_000_000_000, 2)}B`;
  if (abs >= 1_000_000) return `${trimFixed(value / 1_000_000, 2)}M`;
  if (abs >= 10_000) return `${trimFixed(value / 1_000, 1)}k`;
  return integerFormat.format(value);
}

/** Lamports as SOL with up to `decimals` decimals, trailing zeros removed: 1_500_000 -> "0.0015 SOL". */
export function formatSol(lamports: number | null | undefined, decimals = 9): string {
  if (lamports === null || lamports === undefined || !Number.isFinite(lamports)) return '—';
  return `${trimFixed(lamports / 1_000_000_000, decimals)} SOL`;
}

function trimFixed(value: number, digits: number): string {
  return value.toFixed(digits).replace(/\.?0+$/, '');
}

/**
 * Shortens an id for a table cell while keeping both ends, which is what people compare by eye:
 * "tx_01JD3…X7QK", "5eYk…9fQm". Short ids are returned unchanged.
 */
export function shortId(id: string, head = 6, tail = 4): string {
  if (id.length <= head + tail + 1) return id;
  return `${id.slice(0, head)}…${id.slice(-tail)}`;
}

/** A `tx_` + ULID id shortened to its distinctive parts (the ULID's leading time part is shared by neighbours). */
export function shortTxId(id: string): string {
  return id.startsWith('tx_') ? `tx_…${id.slice(-8)}` : shortId(id);
}

/** Wall-clock time of day with milliseconds, local zone: "14:03:07.412". */
export function formatClock(epochMs: number | null | undefined): string {
  if (epochMs === null || epochMs === undefined) return '—';
  const d = new Date(epochMs);
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** A duration for humans: 840 ms / 3.2 s / 4m 05s / 2h 10m. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${trimFixed(ms / 1_000, 1)} s`;
  const totalSeconds = Math.floor(ms / 1_000);
  if (totalSeconds < 3_600)
    return `${Math.floor(totalSeconds / 60)}m ${String(totalSeconds % 60).padStart(2, '0')}s`;
  return `${Math.floor(totalSeconds / 3_600)}h ${String(Math.floor((totalSeconds % 3_600) / 60)).padStart(2, '0')}m`;
}

/** How long ago, relative to `now`: "just now", "12 s ago", "3m 10s ago". */
export function formatAgo(epochMs: number | null | undefined, now: number): string {
  if (epochMs === null || epochMs === undefined) return 'never';
  const ms = Math.max(0, now - epochMs);
  return ms < 1_000 ? 'just now' : `${formatDuration(ms)} ago`;
}
