import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { TICK_INCREMENTS_S, formatTickTime, tipTimeRange } from '../chart-time';
import { formatLamportsCompact } from '../format';
import type { DashboardState, TipSample } from '../store';
import { Panel } from './common';

// Percentile lines from cool to hot; the ema is dashed so it reads as a different kind of line.
const SERIES: Array<{ key: keyof Omit<TipSample, 't'>; color: string; dash?: number[] }> = [
  { key: 'p25', color: '#5b8def' },
  { key: 'p50', color: '#3fb6a8' },
  { key: 'p75', color: '#e6c35c' },
  { key: 'p95', color: '#f08a4b' },
  { key: 'p99', color: '#e5534b' },
  { key: 'ema', color: '#b48ee6', dash: [6, 4] },
];

/** uPlot's columnar data; zeros become gaps because the y axis is logarithmic. */
function toColumns(history: TipSample[]): uPlot.AlignedData {
  const xs = history.map((s) => s.t);
  const columns = SERIES.map(({ key }) => history.map((s) => (s[key] > 0 ? s[key] : null)));
  return [xs, ...columns];
}

/** Keep only decade ticks (10k, 100k, 1M) when there are at least two, so the log axis is not a wall of lines. */
function decadesOnly(_u: uPlot, splits: number[]): Array<number | null> {
  const isDecade = (v: number) => Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9;
  const decades = splits.filter(isDecade).length;
  return decades >= 2 ? splits.map((v) => (isDecade(v) ? v : null)) : splits;
}

function chartOptions(width: number, height: number): uPlot.Options {
  const axis = { stroke: '#8b95a7', grid: { stroke: '#222a36', width: 1 }, ticks: { show: false } };
  return {
    width,
    height,
    scales: {
      x: {
        time: true,
        range: (_u, min, max) => tipTimeRange(min, max, Date.now() / 1_000),
      },
      // Tips span orders of magnitude (p25 to p99), so a log axis keeps every line readable.
      y: { distr: 3, log: 10 },
    },
    // The legend is drawn by the panel (one line in its title bar), leaving the height to the plot.
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    axes: [
      {
        ...axis,
        // One line of labels ("14:03:07"), so the axis needs less height and labels get room not to collide.
        size: 28,
        space: 80,
        incrs: TICK_INCREMENTS_S,
        values: (_u, ticks) => ticks.map(formatTickTime),
      },
      {
        ...axis,
        size: 50,
        filter: decadesOnly,
        grid: { ...axis.grid, filter: decadesOnly },
        values: (_u, ticks) => ticks.map((v) => (v === null ? '' : formatLamportsCompact(v))),
      },
    ],
    series: [
      {},
      ...SERIES.map(({ key, color, dash }) => ({
        label: key,
        stroke: color,
        width: key === 'p50' || key === 'p75' ? 2 : 1.25,
        ...(dash ? { dash } : {}),
        spanGaps: false,
        points: { show: false },
      })),
    ],
  };
}

export function TipChartPanel({ state }: { state: DashboardState }) {
  const holder = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const history = state.tipHistory;
  const latest = useRef(history);
  latest.current = history;

  useEffect(() => {
    const el = holder.current;
    if (!el) return;
    const size = () => ({
      width: Math.max(200, Math.floor(el.clientWidth)),
      height: Math.max(90, Math.floor(el.clientHeight)),
    });
    const chart = new uPlot(chartOptions(size().width, size().height), toColumns(latest.current), el);
    plot.current = chart;
    const observer = new ResizeObserver(() => chart.setSize(size()));
    observer.observe(el);
    return () => {
      observer.disconnect();
      chart.destroy();
      plot.current = null;
    };
  }, []);

  useEffect(() => {
    plot.current?.setData(toColumns(history));
  }, [history]);

  return (
    <Panel
      title="Tip floor over time"
      className="area-chart"
      testId="panel-chart"
      actions={
        <span className="chart-legend small">
          {SERIES.map(({ key, color, dash }) => (
            <span key={key} className="legend-item">
              <span className={`legend-swatch ${dash ? 'dashed' : ''}`} style={{ borderColor: color }} />
              {key}
            </span>
          ))}
          <span className="muted">· log</span>
        </span>
      }
    >
      <div className="chart-holder" ref={holder} data-testid="tip-chart" />
    </Panel>
  );
}
