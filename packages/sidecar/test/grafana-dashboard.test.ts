import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Metrics } from '../src/metrics';

/**
 * tooling/grafana/relay-dashboard.json (#18) may only chart what relay exports: every metric an expression names is
 * in the sidecar's /metrics exposition (or is one of the webhook metrics being added beside it), and every panel
 * reads the `DS_PROMETHEUS` data-source variable, so the dashboard imports into any Grafana.
 */

interface Target {
  expr?: string;
  datasource?: unknown;
}
interface Panel {
  type: string;
  title: string;
  id: number;
  datasource?: unknown;
  targets?: Target[];
  panels?: Panel[];
}
interface Variable {
  type: string;
  name: string;
  query?: unknown;
  datasource?: unknown;
}

const DASHBOARD_PATH = join(__dirname, '..', '..', '..', 'tooling', 'grafana', 'relay-dashboard.json');
const dashboard = JSON.parse(readFileSync(DASHBOARD_PATH, 'utf8')) as {
  schemaVersion: number;
  panels: Panel[];
  templating: { list: Variable[] };
};
const DATASOURCE = { type: 'prometheus', uid: '${DS_PROMETHEUS}' };

/** Every panel, rows' folded panels included. */
function allPanels(panels: Panel[]): Panel[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}

const PROMQL_WORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
]);

/**
 * The metric names in a PromQL expression: what is left once strings, label matchers, ranges and label lists are
 * taken out, minus functions (a name followed by `(`), keywords and numbers.
 */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names: string[] = [];
  for (const match of bare.matchAll(/(?<![\w.$])[a-zA-Z_:][\w:]*/g)) {
    const rest = bare.slice((match.index ?? 0) + match[0].length).trimStart();
    if (rest.startsWith('(') || PROMQL_WORDS.has(match[0])) continue;
    names.push(match[0]);
  }
  return names;
}

/** Every series name the exposition can carry: counters and gauges as named, histograms with their suffixes. */
async function exportedSeries(): Promise<Set<string>> {
  const text = await new Metrics().registry.metrics();
  const series = new Set<string>();
  for (const line of text.split('\n')) {
    const [, name, type] = /^# TYPE (\S+) (\S+)$/.exec(line) ?? [];
    if (!name) continue;
    series.add(name);
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) series.add(name + suffix);
    if (type === 'summary') for (const suffix of ['_sum', '_count']) series.add(name + suffix);
  }
  return series;
}

test('the extractor finds metric names and nothing else (so the check below means something)', () => {
  expect(
    metricNames(
      'sum by (state) (rate(relay_a_total{job=~"$job", state="relay_b"}[$__rate_interval])) * 60 / 1e9 or vector(0)',
    ),
  ).toEqual(['relay_a_total']);
  expect(
    metricNames('histogram_quantile(0.99, sum by (le) (rate(x_bucket{a="b"}[5m]))) / ignoring(a) y'),
  ).toEqual(['x_bucket', 'y']);
});

test('every metric the dashboard names is exported by the sidecar', async () => {
  const known = new Set(await exportedSeries());
  const used = new Map<string, string>();
  for (const panel of allPanels(dashboard.panels)) {
    for (const target of panel.targets ?? []) {
      const names = metricNames(target.expr ?? '');
      // Each query charts at least one metric (the panel title in the message says which one did not).
      expect({ panel: panel.title, names: names.length > 0 }).toEqual({ panel: panel.title, names: true });
      for (const name of names) used.set(name, panel.title);
    }
  }
  for (const variable of dashboard.templating.list.filter((v) => v.type === 'query')) {
    const query = JSON.stringify(variable.query);
    const metric = /label_values\((\w+)/.exec(query)?.[1];
    expect(metric).toBeDefined();
    used.set(metric as string, `variable ${variable.name}`);
  }
  const unknown = [...used].filter(([name]) => !known.has(name)).map(([name, where]) => `${name} (${where})`);
  expect(unknown).toEqual([]);
  // The rows an operator needs are there: transitions, tips, upstreams, resubscribes, orphaned landings, SSE, webhooks.
  for (const name of [
    'relay_tx_transitions_total',
    'relay_attempt_outcomes_total',
    'relay_tips_paid_lamports_total',
    'relay_upstream_up',
    'relay_bundle_result_resubscribes_total',
    'relay_orphaned_landings_total',
    'relay_sse_slow_clients_dropped',
    'relay_webhook_deliveries_total',
    'relay_webhook_outbox_pending',
    'relay_webhook_delivery_lag_seconds_bucket',
    'relay_bundles_landed_total',
    'relay_bundles_lost_total',
  ]) {
    expect(used.has(name)).toBe(true);
  }
});

test('every panel and every query reads the DS_PROMETHEUS variable, a Prometheus data-source variable', () => {
  expect(dashboard.schemaVersion).toBe(39);
  const variable = dashboard.templating.list.find((v) => v.name === 'DS_PROMETHEUS');
  expect(variable).toMatchObject({ type: 'datasource', query: 'prometheus' });
  for (const query of dashboard.templating.list.filter((v) => v.type === 'query')) {
    expect({ variable: query.name, datasource: query.datasource }).toEqual({
      variable: query.name,
      datasource: DATASOURCE,
    });
  }
  const panels = allPanels(dashboard.panels);
  expect(new Set(panels.map((p) => p.id)).size).toBe(panels.length);
  for (const panel of panels) {
    if (panel.type === 'row') {
      expect(panel.targets ?? []).toEqual([]); // a row only groups; it queries nothing
      continue;
    }
    expect({ panel: panel.title, datasource: panel.datasource }).toEqual({
      panel: panel.title,
      datasource: DATASOURCE,
    });
    expect(panel.targets?.length).toBeGreaterThan(0);
    for (const target of panel.targets ?? []) {
      expect({ panel: panel.title, datasource: target.datasource }).toEqual({
        panel: panel.title,
        datasource: DATASOURCE,
      });
    }
  }
});
