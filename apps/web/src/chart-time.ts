/**
 * The tip chart's time axis, kept free of uPlot and the DOM so it can be tested on its own. uPlot's time scale
 * counts in seconds since the epoch.
 */

/**
 * The shortest x span shown. History starts when the page opens, one sample a second: a lone sample has no extent
 * to scale to, so the axis shows this much before it; from the third second on the axis follows the data.
 */
export const MIN_SPAN_S = 2;

/** Tick steps in whole seconds: samples are a second apart, so sub-second ticks would only repeat a label. */
export const TICK_INCREMENTS_S = [
  1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1_800, 3_600, 7_200, 21_600, 86_400,
];

/**
 * The x range: the data's own extent, so a fresh page draws a line across the plot rather than a sliver at the
 * right edge of a fixed window; the history's cap (~15 minutes) then bounds it. Spans under MIN_SPAN_S end at
 * the newest sample (or now, with no data).
 */
export function tipTimeRange(min: number | null, max: number | null, nowS: number): [number, number] {
  const hi = max ?? nowS;
  const lo = min ?? hi;
  return hi - lo >= MIN_SPAN_S ? [lo, hi] : [hi - MIN_SPAN_S, hi];
}

/**
 * One short line per tick, local time "14:03:07". uPlot's default time labels add a second line with the date at
 * the first tick, which overlaps its neighbour on a panel this narrow.
 */
export function formatTickTime(epochS: number): string {
  const d = new Date(epochS * 1_000);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}
