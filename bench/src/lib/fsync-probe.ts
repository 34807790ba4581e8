import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { distribution, type Distribution } from './stats';

/**
 * The disk's own cost of one durable append (write + fdatasync of ~300 bytes), the floor under every journaled step
 * of the sidecar: a write-ahead submit cannot be faster than this, whatever the code does.
 */
export function probeFsync(count = 200): Distribution {
  const dir = mkdtempSync(join(tmpdir(), 'relay-bench-fsync-'));
  const fd = openSync(join(dir, 'probe.jsonl'), 'a');
  const line = Buffer.from(`${JSON.stringify({ op: 'probe', pad: 'x'.repeat(280) })}\n`);
  const times: number[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const t0 = performance.now();
      writeSync(fd, line);
      fdatasyncSync(fd);
      times.push(performance.now() - t0);
    }
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
  return distribution(times);
}
