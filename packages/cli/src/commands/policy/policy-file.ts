import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { parsePolicyText, type PolicyValidation } from '@solrelay/core';
import { EXIT_CODES, ExitError } from '../../errors';

export interface PolicyFileState {
  path: string;
  /** False when there is no file: every key is at its default. */
  exists: boolean;
  validation: PolicyValidation;
  /** The file's JSON as parsed, valid or not; undefined when it is not JSON. `reset` edits an invalid file from it. */
  raw: unknown;
}

/** Reads and validates a policy file. A missing file is valid and empty (all defaults). */
export async function readPolicyFile(path: string): Promise<PolicyFileState> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new ExitError(EXIT_CODES.failure, `cannot read ${path}: ${(error as Error).message}`);
    }
    return { path, exists: false, validation: parsePolicyText('{}'), raw: {} };
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    raw = undefined; // parsePolicyText reports it as invalid_json
  }
  return { path, exists: true, validation: parsePolicyText(text), raw };
}

/**
 * Writes the file atomically: a temp file in the same directory, flushed, then renamed over the target. A running
 * sidecar watches the directory, so it sees one complete file appear, never a half-written one.
 */
export async function writeFileAtomic(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    const handle = await open(temp, 'w', 0o644);
    try {
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw new ExitError(EXIT_CODES.failure, `cannot write ${path}: ${(error as Error).message}`);
  }
}

/** Removes the file; a missing file is already what was asked for. */
export async function removeFile(path: string): Promise<boolean> {
  try {
    await rm(path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw new ExitError(EXIT_CODES.failure, `cannot delete ${path}: ${(error as Error).message}`);
  }
}
