import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

export interface MachineInfo {
  cpu_model: string;
  cores: number;
  ram_gib: number;
  node: string;
  os: string;
  date: string;
  git_sha: string;
  /** Code (packages, apps, bench sources) differed from the commit when the run started: the sha is its base. */
  dirty?: boolean;
}

export function machineInfo(repoRoot: string): MachineInfo {
  let cpuModel = os.cpus()[0]?.model ?? 'unknown';
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'));
    if (line) cpuModel = line.split(':')[1]?.trim() ?? cpuModel;
  } catch {
    // not Linux: os.cpus() is the fallback
  }
  let sha = 'unknown';
  let dirty = false;
  try {
    sha = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' }).trim();
    const changed = execFileSync(
      'git',
      ['status', '--porcelain', '--', 'packages', 'apps', 'bench/src', 'protos'],
      { cwd: repoRoot, encoding: 'utf8' },
    );
    dirty = changed.trim().length > 0;
  } catch {
    // not a git checkout
  }
  return {
    cpu_model: cpuModel,
    cores: os.availableParallelism(),
    ram_gib: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    os: `${os.type()} ${os.release()}`,
    date: new Date().toISOString(),
    git_sha: sha,
    ...(dirty ? { dirty } : {}),
  };
}

/** The 1-minute load average: other engineers share this machine, so every result records it. */
export function loadAverage(): [number, number, number] {
  const [a, b, c] = os.loadavg();
  return [round2(a ?? 0), round2(b ?? 0), round2(c ?? 0)];
}

function round2(v: number): number {
  return Math.round(v * 100) / 100;
}
