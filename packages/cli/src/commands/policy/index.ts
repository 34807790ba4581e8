import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import {
  isRelayError,
  parsePolicyText,
  resetPolicy,
  resolvePolicy,
  serializePolicyFile,
  setPolicyValue,
  validatePolicy,
  type Policy,
  type PolicyFile,
  type PolicyKey,
  type PolicyProblem,
  type PolicyValidation,
} from '@solrelay/core';
import { policyFilePath } from '../../env';
import { EXIT_CODES, ExitError } from '../../errors';
import { gridTable, paint, type CliContext, type CommandResult } from '../../output';
import { readPolicyFile, removeFile, writeFileAtomic, type PolicyFileState } from './policy-file';

/**
 * `relay policy ...`: edits the policy file directly, so it works with or without a running sidecar; a running
 * one reloads the file (it watches the directory), which is why every write is atomic.
 */

const UNITS: Record<PolicyKey, string> = {
  'max-tip': 'lamports',
  'tip-percentile': 'percentile',
  'max-retries': 'count',
  'expiry-slots': 'slots',
  'escalation-step': 'lamports',
  'max-queue': 'count',
  'rate-limit': 'tx/min',
  priority: 'priority',
  'min-tip': 'lamports',
  'spend-limit': 'lamports/hour',
};

function formatValue(value: Policy[PolicyKey]): string {
  if (value === null) return 'unset';
  return typeof value === 'number' ? value.toLocaleString('en-US') : value;
}

function problemLine(p: PolicyProblem): string {
  return `${p.severity}: ${p.message} [${p.code}]`;
}

function errorsOf(validation: PolicyValidation): PolicyProblem[] {
  return validation.problems.filter((p) => p.severity === 'error');
}

/** The file's keys when it is valid; otherwise exit 1 listing every error, so nothing is built on a broken file. */
function validFileOf(state: PolicyFileState, action: string): PolicyFile {
  if (state.validation.ok && state.validation.file) return state.validation.file;
  throw new ExitError(EXIT_CODES.failure, `${state.path} is invalid; cannot ${action}`, {
    details: errorsOf(state.validation).map(problemLine),
    hint: 'Fix the file, reset the bad key with `relay policy reset <key>`, or start over with `relay policy clear`.',
  });
}

/**
 * Validates the file-to-be and writes it, or exits 1 listing every error and leaves the old file untouched. The
 * candidate may be any parsed JSON (`reset` on an invalid file passes what is left of it), so it is `unknown`.
 */
async function writeValidated(path: string, candidate: unknown, ctx: CliContext): Promise<PolicyValidation> {
  const validation = validatePolicy(candidate);
  if (!validation.ok || !validation.file) {
    throw new ExitError(EXIT_CODES.failure, `refused: the policy would be invalid; ${path} is unchanged`, {
      details: errorsOf(validation).map(problemLine),
    });
  }
  await writeFileAtomic(path, serializePolicyFile(validation.file));
  for (const warning of validation.problems) ctx.io.stderr(`relay: ${problemLine(warning)}\n`);
  return validation;
}

/** A bad key or value on the command line is a usage error (2); core's RelayError says which and why. */
function asUsage(error: unknown): unknown {
  if (
    isRelayError(error, 'RELAY_E_POLICY_UNKNOWN_KEY') ||
    isRelayError(error, 'RELAY_E_POLICY_INVALID_VALUE')
  ) {
    return new ExitError(EXIT_CODES.usage, error.message, {
      hint: 'Run `relay policy show` for the keys and their values.',
    });
  }
  return error;
}

export async function policyShow(ctx: CliContext): Promise<CommandResult> {
  const state = await readPolicyFile(policyFilePath(ctx));
  if (!state.validation.ok) {
    const data = { path: state.path, exists: state.exists, ok: false, problems: state.validation.problems };
    const text = [
      `${state.path} is invalid:`,
      ...state.validation.problems.map((p) => `  ${problemLine(p)}`),
    ];
    return { data, text: text.join('\n'), exitCode: EXIT_CODES.failure };
  }
  const resolved = resolvePolicy(state.validation.file ?? {});
  const data = {
    path: state.path,
    exists: state.exists,
    ok: true,
    values: resolved.values,
    overridden: resolved.overridden,
    entries: resolved.entries,
    problems: state.validation.problems,
  };
  const rows = resolved.entries.map((e) => [
    e.key,
    formatValue(e.value),
    formatValue(e.default),
    UNITS[e.key],
    e.source === 'file' ? paint(ctx.color, 'yellow', 'overridden') : 'default',
  ]);
  const lines = [
    `${state.path}${state.exists ? '' : ' (no file: every key at its default)'}`,
    gridTable(['key', 'value', 'default', 'unit', 'status'], rows, ctx.color),
    ...state.validation.problems.map(problemLine),
  ];
  return { data, text: lines.join('\n') };
}

export async function policySet(
  ctx: CliContext,
  options: { key: string; value: string },
): Promise<CommandResult> {
  const path = policyFilePath(ctx);
  const current = validFileOf(await readPolicyFile(path), 'set a key');
  let next: PolicyFile;
  try {
    next = setPolicyValue(current, options.key, options.value);
  } catch (error) {
    throw asUsage(error);
  }
  const validation = await writeValidated(path, next, ctx);
  const key = options.key as PolicyKey;
  const value = validation.policy?.[key] ?? null;
  return {
    data: { path, key, value, file: validation.file, problems: validation.problems },
    text: `${key} = ${formatValue(value)}${key in (validation.file ?? {}) ? '' : ' (default)'}  (${path})`,
  };
}

export async function policyValidate(ctx: CliContext): Promise<CommandResult> {
  const state = await readPolicyFile(policyFilePath(ctx));
  const { ok, problems } = state.validation;
  const data = { path: state.path, exists: state.exists, ok, problems };
  const head = ok ? `${state.path}: valid` : `${state.path}: ${errorsOf(state.validation).length} error(s)`;
  const text = [
    head + (state.exists ? '' : ' (no file: every key at its default)'),
    ...problems.map((p) => `  ${problemLine(p)}`),
  ];
  return { data, text: text.join('\n'), exitCode: ok ? EXIT_CODES.ok : EXIT_CODES.failure };
}

/**
 * `reset` is the way back from a bad value, so unlike `set` it does not require a valid file: it starts from the
 * keys the file holds (valid or not), drops the one being reset (all of them with no key), and writes the result
 * only if that validates. Resetting every key needs nothing from the file, not even valid JSON.
 */
export async function policyReset(ctx: CliContext, options: { key?: string }): Promise<CommandResult> {
  const path = policyFilePath(ctx);
  let next: Record<string, unknown>;
  try {
    resetPolicy({}, options.key); // an unknown key is a usage error, whatever the file holds
  } catch (error) {
    throw asUsage(error);
  }
  if (options.key === undefined) {
    next = {};
  } else {
    const state = await readPolicyFile(path);
    const raw = state.raw;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      throw new ExitError(EXIT_CODES.failure, `${path} is not a JSON object; cannot reset ${options.key}`, {
        details: errorsOf(state.validation).map(problemLine),
        hint: 'Reset every key with `relay policy reset`, or start over with `relay policy clear`.',
      });
    }
    next = { ...(raw as Record<string, unknown>) };
    delete next[options.key];
  }
  const validation = await writeValidated(path, next, ctx);
  return {
    data: { path, reset: options.key ?? 'all', file: validation.file },
    text: options.key
      ? `${options.key} reset to its default (${path})`
      : `every key reset to its default (${path})`,
  };
}

export async function policyClear(ctx: CliContext): Promise<CommandResult> {
  const path = policyFilePath(ctx);
  const deleted = await removeFile(path);
  return {
    data: { path, deleted },
    text: deleted
      ? `deleted ${path}; every key is at its default`
      : `no policy file at ${path}; every key is at its default`,
  };
}

export async function policyExport(ctx: CliContext, options: { path: string }): Promise<CommandResult> {
  const state = await readPolicyFile(policyFilePath(ctx));
  const resolved = resolvePolicy(validFileOf(state, 'export'));
  const target = resolve(ctx.cwd, options.path);
  await writeFileAtomic(target, serializePolicyFile(resolved.values));
  return { data: { path: target, values: resolved.values }, text: `saved the resolved policy to ${target}` };
}

export async function policyImport(ctx: CliContext, options: { file: string }): Promise<CommandResult> {
  const source = resolve(ctx.cwd, options.file);
  let text: string;
  try {
    text = await readFile(source, 'utf8');
  } catch (error) {
    throw new ExitError(EXIT_CODES.failure, `cannot read ${source}: ${(error as Error).message}`);
  }
  const incoming = parsePolicyText(text);
  if (!incoming.ok || !incoming.file) {
    throw new ExitError(EXIT_CODES.failure, `refused: ${source} is not a valid policy; nothing was changed`, {
      details: errorsOf(incoming).map(problemLine),
    });
  }
  const path = policyFilePath(ctx);
  const validation = await writeValidated(path, incoming.file, ctx);
  return {
    data: { path, from: source, file: validation.file },
    text: `applied ${source} to ${path}`,
  };
}
