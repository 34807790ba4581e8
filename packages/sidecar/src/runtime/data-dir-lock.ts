import { mkdir, open, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { RelayError } from '@solrelay/core';

/** The lock file inside the data directory. */
export const LOCK_FILE = 'relay.lock';

/**
 * One sidecar per data directory: two replaying one journal would send the same transactions twice. The lock is a
 * file created exclusively (O_EXCL) with the holder's pid. A lock whose pid is no longer running was left by a
 * crash and is taken over, so a crash never blocks the next start; a live holder makes the start fail with
 * `RELAY_E_CONFIG_DATA_DIR_IN_USE`, naming the directory and the pid.
 */
export async function lockDataDir(
  dataDir: string,
  pid: number = process.pid,
  isAlive: (pid: number) => boolean = processAlive,
): Promise<{ release(): Promise<void> }> {
  await mkdir(dataDir, { recursive: true });
  const path = join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const handle = await open(path, 'wx', 0o600);
      await handle.writeFile(`${pid}\n`);
      await handle.close();
      let released = false;
      return {
        release: async () => {
          if (released) return;
          released = true;
          // Only our own lock: a takeover by another process after a pid mix-up must not be undone.
          if ((await holderOf(path)) === pid) await unlink(path).catch(() => undefined);
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = await holderOf(path);
    if (holder !== null && holder !== pid && isAlive(holder)) {
      throw new RelayError('RELAY_E_CONFIG_DATA_DIR_IN_USE', { data_dir: dataDir, pid: holder });
    }
    // Left by a process that is gone (or unreadable, torn by a crash mid-write): take it over. If two starts race
    // here, O_EXCL above lets only one of them create the new lock.
    await unlink(path).catch(() => undefined);
  }
  throw new RelayError('RELAY_E_CONFIG_DATA_DIR_IN_USE', {
    data_dir: dataDir,
    pid: (await holderOf(path)) ?? 0,
  });
}

async function holderOf(path: string): Promise<number | null> {
  try {
    const pid = Number.parseInt((await readFile(path, 'utf8')).trim(), 10);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
