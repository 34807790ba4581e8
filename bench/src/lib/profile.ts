import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Which module a frame belongs to, for a per-package view of where the time goes. */
function category(url: string, functionName: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return url.replace(/^node:internal\/(\w+).*$/, 'node:$1');
  const pkg = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg?.[1]) return pkg[1];
  const own = /\/(packages|apps)\/([^/]+)\//.exec(url);
  return own ? `${own[1]}/${own[2]}` : url;
}

export interface ProfileFrame {
  frame: string;
  self_pct: number;
}

/** Top self-time frames of the newest `.cpuprofile` in `dir` (node --cpu-prof), grouped by function and file. */
export interface ProfileSummary {
  file: string;
  /** Busy (non-idle) sampled time. */
  total_ms: number;
  /** Self time by function, as a share of busy time. */
  frames: ProfileFrame[];
  /** Self time by package or node module. */
  categories: ProfileFrame[];
}

export function summarizeCpuProfile(dir: string, top = 15): ProfileSummary | null {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort();
  const file = files[files.length - 1];
  if (!file) return null;
  const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<string, number>();
  const categoryUs = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    const node = byId.get(id);
    if (!node) return;
    const { functionName, url, lineNumber } = node.callFrame;
    // Idle time is the event loop waiting: leaving it in would hide what the busy time is spent on.
    if (functionName === '(idle)') return;
    const cat = category(url, functionName);
    categoryUs.set(cat, (categoryUs.get(cat) ?? 0) + delta);
    const short = url
      .replace(/^.*node_modules\/(\.pnpm\/[^/]+\/node_modules\/)?/, '')
      .replace(/^.*\/(packages|apps)\//, '$1/');
    const key = `${functionName || '(anonymous)'} ${short ? `${short}:${lineNumber + 1}` : ''}`.trim();
    selfUs.set(key, (selfUs.get(key) ?? 0) + delta);
    total += delta;
  });
  const ranked = (m: Map<string, number>) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([frame, us]) => ({ frame, self_pct: Math.round((us / total) * 1000) / 10 }));
  return {
    file: join(dir, file),
    total_ms: Math.round(total / 1000),
    frames: ranked(selfUs),
    categories: ranked(categoryUs),
  };
}
