import { METHODS } from 'node:http';
import { brotliCompressSync, constants, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import type { RawRequest } from './fuzz-http';
import { stripControls, wireHeader } from './fuzz-http';
import type { EncodedTx, TxMutation } from './fuzz-tx';

/**
 * The bad-input generator for the sidecar's HTTP API. fast-check draws pure descriptions of requests (a
 * `FuzzCase`); the parts that only exist at run time — a signed transfer on a fresh blockhash, the id of a
 * transaction or bundle the sidecar has accepted, the event hub's boot id — are `Dyn` placeholders the runner
 * fills in when it sends the request. Every route of packages/sidecar/src/http/app.ts is covered, with wrong
 * methods, unknown routes, odd paths and query strings, every kind of body (wrong types, huge numbers, unicode,
 * truncated or broken base64/base58, unsigned or oversize transactions, deep nesting, oversize bodies) under
 * every kind of content type, encoding and framing, and good and bad Authorization and Last-Event-ID headers.
 */

/** A value the runner supplies when it sends the request. */
export type DynRef =
  | { kind: 'tx'; slot: number; mutation: TxMutation }
  | { kind: 'tx-id'; pick: number }
  | { kind: 'bundle-id'; pick: number }
  | { kind: 'raw'; text: string };

export class Dyn {
  constructor(readonly ref: DynRef) {}
}

/** A JSON body template: plain JSON with `Dyn` leaves. */
export type Tpl = null | boolean | number | string | Dyn | Tpl[] | { [key: string]: Tpl };

export type BodySpec =
  | { kind: 'none' }
  | { kind: 'json'; tpl: Tpl; prefix: string; suffix: string }
  | { kind: 'truncated-json'; tpl: Tpl; cut: number }
  | { kind: 'text'; text: string }
  | { kind: 'bytes'; bytes: number[] }
  | { kind: 'large'; bytes: number; shape: 'string' | 'array' | 'garbage' };

export type ContentEncoding = 'none' | 'identity' | 'gzip' | 'deflate' | 'br' | 'gzip-garbage' | 'bogus';

export type AuthSpec =
  | { kind: 'good' }
  | { kind: 'good-lowercase-scheme' }
  | { kind: 'missing' }
  | { kind: 'wrong'; token: string }
  | { kind: 'raw'; value: string }
  | { kind: 'good-plus'; suffix: string };

export type LastEventIdSpec =
  | { kind: 'none' }
  | { kind: 'this-boot'; seq: string }
  /** An id of this boot `back` events before the newest: a replay of a few events, as a reconnecting client asks. */
  | { kind: 'recent'; back: number }
  | { kind: 'other'; value: string }
  | { kind: 'many'; values: string[] };

export interface FuzzCase {
  /** A label for the per-route histogram. */
  route: string;
  method: string;
  path: Array<string | Dyn>;
  query: string;
  body: BodySpec;
  contentType: string | null;
  /** Encode the JSON text in this charset before sending (the content type may or may not say so). */
  charset: 'utf8' | 'utf16le' | 'latin1';
  contentEncoding: ContentEncoding;
  framing: 'length' | 'chunked';
  auth: AuthSpec;
  lastEventId: LastEventIdSpec;
  extraHeaders: Array<[string, string]>;
}

// ------------------------------------------------------------------------------------------------- values

const raw = (text: string) => new Dyn({ kind: 'raw', text });

const NASTY_STRINGS = [
  '',
  ' ',
  '\u0000',
  '\uFEFF',
  '\u202E',
  '\uD800',
  '💥',
  'é',
  'Ω≈ç√∫',
  '𝓤𝓷𝓲𝓬𝓸𝓭𝓮',
  'null',
  'undefined',
  'true',
  '0',
  '-1',
  'NaN',
  '__proto__',
  'constructor',
  'hasOwnProperty',
  '%s%n%x',
  '${7*7}',
  '../../etc/passwd',
  '\\',
  '"',
  "'; DROP TABLE tx; --",
  '<script>alert(1)</script>',
  '\r\n\r\n',
  'tx_',
  'tx_01J0000000000000000000000Z',
  'a'.repeat(201),
  'x'.repeat(4096),
  'p75',
  'base64',
  'base58',
  'cortex',
  'reflex',
  'included',
  'auto',
  'high',
];

export const nastyString: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 24 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
  { weight: 3, arbitrary: fc.constantFrom(...NASTY_STRINGS) },
);

/** Numbers as JSON carries them, including what JavaScript cannot hold exactly (sent as raw text). */
export const nastyNumber: fc.Arbitrary<Tpl> = fc.oneof(
  fc.integer(),
  fc.integer({ min: -10, max: 3_000_000 }),
  fc.double(),
  fc.constantFrom(0, -0, 1, 999, 1000, 1.5, 2 ** 53, 2 ** 53 + 2, -1, 1e21, 1e308, Number.MAX_SAFE_INTEGER),
  fc
    .constantFrom(
      '1e400',
      '-1e400',
      '9007199254740993',
      '123456789012345678901234567890',
      '1.0',
      '1E3',
      '-0',
      '0.0000001',
      '5e-324',
      '1000.000000000000001',
    )
    .map(raw),
);

/** Deeply nested arrays and objects (parsers are fine; anything that walks or serializes them may not be). */
export const deepNesting: fc.Arbitrary<Tpl> = fc
  .tuple(fc.integer({ min: 500, max: 8_000 }), fc.boolean())
  .map(([depth, objects]) =>
    raw(
      objects ? `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}` : `${'['.repeat(depth)}${']'.repeat(depth)}`,
    ),
  );

export const anyValue: fc.Arbitrary<Tpl> = fc.oneof(
  { weight: 3, arbitrary: nastyString },
  { weight: 3, arbitrary: nastyNumber },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Tpl> },
  { weight: 1, arbitrary: deepNesting },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 5_000, max: 60_000 }).map((n) => 'z'.repeat(n)),
  },
);

// ------------------------------------------------------------------------------------------------- transactions

const mutation: fc.Arbitrary<TxMutation> = fc.oneof(
  { weight: 5, arbitrary: fc.constant<TxMutation>({ kind: 'valid' }) },
  { weight: 1, arbitrary: fc.constant<TxMutation>({ kind: 'valid-base58' }) },
  { weight: 1, arbitrary: fc.constant<TxMutation>({ kind: 'base64-unpadded' }) },
  { weight: 2, arbitrary: fc.nat().map((at): TxMutation => ({ kind: 'truncate', at })) },
  { weight: 2, arbitrary: fc.nat().map((bit): TxMutation => ({ kind: 'flip-signature', bit })) },
  { weight: 2, arbitrary: fc.nat().map((bit): TxMutation => ({ kind: 'flip-message', bit })) },
  { weight: 2, arbitrary: fc.constant<TxMutation>({ kind: 'unsigned' }) },
  {
    weight: 1,
    arbitrary: fc
      .array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 40 })
      .map((bytes): TxMutation => ({ kind: 'append', bytes })),
  },
  { weight: 2, arbitrary: fc.nat().map((size): TxMutation => ({ kind: 'oversize', size })) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom([0], [2], [4], [0x7f], [0x80, 0x01], [0xff, 0xff, 0x03], [0x80, 0x80, 0x80, 0x80])
      .map((value): TxMutation => ({ kind: 'signature-count', value: [...value] })),
  },
  { weight: 1, arbitrary: fc.nat().map((byte): TxMutation => ({ kind: 'version', byte })) },
  { weight: 1, arbitrary: fc.constant<TxMutation>({ kind: 'as-base58-labelled-base64' }) },
  { weight: 1, arbitrary: fc.constant<TxMutation>({ kind: 'as-base64-labelled-base58' }) },
  { weight: 1, arbitrary: fc.constant<TxMutation>({ kind: 'base64url' }) },
  { weight: 1, arbitrary: fc.nat().map((at): TxMutation => ({ kind: 'base64-whitespace', at })) },
  { weight: 2, arbitrary: fc.nat().map((at): TxMutation => ({ kind: 'base64-cut', at })) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.nat(), fc.constantFrom('!', '-', '_', '.', ' ', '%', 'é', '\u0000', '='))
      .map(([at, char]): TxMutation => ({ kind: 'base64-bad-char', at, char })),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.nat(), fc.constantFrom('0', 'O', 'I', 'l', '+', '/', '=', ' '))
      .map(([at, char]): TxMutation => ({ kind: 'base58-bad-char', at, char })),
  },
);

/** A nearly valid transaction from pool slot `slot`. */
export const txValue: fc.Arbitrary<Tpl> = fc
  .tuple(fc.nat(), mutation)
  .map(([slot, m]) => new Dyn({ kind: 'tx', slot, mutation: m }));

/** A transaction field: mostly nearly valid transactions, sometimes anything at all. */
const txField: fc.Arbitrary<Tpl> = fc.oneof(
  { weight: 8, arbitrary: txValue },
  { weight: 1, arbitrary: anyValue },
  { weight: 1, arbitrary: fc.base64String({ maxLength: 400 }) },
);

function optionalFields(fields: Record<string, fc.Arbitrary<Tpl>>): fc.Arbitrary<Record<string, Tpl>> {
  return fc.record(fields, { requiredKeys: [] }) as fc.Arbitrary<Record<string, Tpl>>;
}

const enqueueOptions = optionalFields({
  encoding: fc.oneof({ weight: 4, arbitrary: fc.constantFrom('base64', 'base58') }, anyValue),
  priority: fc.oneof({ weight: 4, arbitrary: fc.constantFrom('low', 'normal', 'high') }, anyValue),
  tip: fc.oneof({ weight: 4, arbitrary: fc.constantFrom('auto', 'included') }, anyValue),
  expiry_slots: fc.oneof(
    { weight: 2, arbitrary: fc.integer({ min: 1, max: 10_000 }) },
    nastyNumber,
    anyValue,
  ),
  max_tip: fc.oneof(
    { weight: 2, arbitrary: fc.integer({ min: 1000, max: 5_000_000 }) },
    nastyNumber,
    anyValue,
  ),
});

const unknownKeys = fc.dictionary(
  fc.oneof(nastyString, fc.constantFrom('transactions ', 'Transaction', 'tx', 'signature', '__proto__')),
  anyValue,
  { maxKeys: 3 },
);

const enqueueBody: fc.Arbitrary<Tpl> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .tuple(txField, enqueueOptions)
      .map(([transaction, options]) => ({ transaction, ...options })),
  },
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.array(txField, { minLength: 0, maxLength: 6 }), enqueueOptions)
      .map(([transactions, options]) => ({ transactions, ...options })),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(txValue, fc.nat({ max: 4 }))
      .map(([tx, n]) => ({ transactions: Array.from({ length: n + 2 }, () => tx) })),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(txField, fc.array(txField, { maxLength: 3 }))
      .map(([transaction, transactions]) => ({ transaction, transactions })),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(txField, enqueueOptions, unknownKeys)
      .map(([transaction, options, extra]) => ({ ...extra, transaction, ...options })),
  },
  { weight: 2, arbitrary: fc.record({ transaction: anyValue }) },
  { weight: 1, arbitrary: fc.record({ transactions: anyValue }) },
  { weight: 2, arbitrary: anyValue },
  { weight: 1, arbitrary: fc.constant({}) },
);

// ------------------------------------------------------------------------------------------------- other bodies

const txIdValue: fc.Arbitrary<Tpl> = fc.oneof(
  { weight: 3, arbitrary: fc.nat().map((pick) => new Dyn({ kind: 'tx-id', pick })) },
  { weight: 1, arbitrary: fc.stringMatching(/^tx_[0-9A-HJKMNP-TV-Z]{26}$/) },
  { weight: 2, arbitrary: anyValue },
);

const submitBody: fc.Arbitrary<Tpl> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .tuple(
        txIdValue,
        fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 0, max: 3_000_000 }) }, nastyNumber, anyValue),
        fc.oneof({ weight: 3, arbitrary: fc.constantFrom('fuzz', 'p75 of the tip floor') }, anyValue),
        optionalFields({
          escalated: fc.oneof(fc.boolean(), anyValue),
          decision_mode: fc.oneof(fc.constantFrom('cortex', 'reflex'), anyValue),
          trace: fc.oneof(
            fc.constant(null),
            optionalFields({
              model: fc.oneof(fc.constant('claude'), anyValue),
              provider: anyValue,
              latency_ms: nastyNumber,
              usage: fc.oneof(
                optionalFields({ input_tokens: nastyNumber, output_tokens: nastyNumber }),
                anyValue,
              ),
              inputs: anyValue,
              tool_input: anyValue,
              rationale: anyValue,
            }),
            anyValue,
          ),
        }),
        unknownKeys,
      )
      .map(([tx_id, tip_lamports, reason, options, extra]) => ({
        ...extra,
        tx_id,
        tip_lamports,
        reason,
        ...options,
      })),
  },
  { weight: 1, arbitrary: anyValue },
);

const modeBody: fc.Arbitrary<Tpl> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ decision_mode: fc.constantFrom('cortex', 'reflex') }) },
  { weight: 4, arbitrary: fc.record({ decision_mode: anyValue }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom('cortex', 'reflex'), unknownKeys)
      .map(([mode, extra]) => ({ ...extra, decision_mode: mode })),
  },
  { weight: 1, arbitrary: anyValue },
);

const anyBody: fc.Arbitrary<Tpl> = fc.oneof(anyValue, enqueueBody, submitBody);

function bodyFrom(tpl: fc.Arbitrary<Tpl>): fc.Arbitrary<BodySpec> {
  return fc.oneof(
    {
      weight: 14,
      arbitrary: tpl.map((t): BodySpec => ({ kind: 'json', tpl: t, prefix: '', suffix: '' })),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          tpl,
          fc.constantFrom('\uFEFF', ' \n\t', '\u0000', ")]}'\n"),
          fc.constantFrom('', ' ', 'x', ',', '}'),
        )
        .map(([t, prefix, suffix]): BodySpec => ({ kind: 'json', tpl: t, prefix, suffix })),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(tpl, fc.constantFrom('', ',', '}', ' trailing', '\n{"transaction":"AA=="}', '\u0000'))
        .map(([t, suffix]): BodySpec => ({ kind: 'json', tpl: t, prefix: '', suffix })),
    },
    {
      weight: 2,
      arbitrary: fc
        .tuple(tpl, fc.nat())
        .map(([t, cut]): BodySpec => ({ kind: 'truncated-json', tpl: t, cut })),
    },
    {
      weight: 2,
      arbitrary: fc
        .oneof(
          nastyString,
          fc.constantFrom(
            '',
            '{',
            '}',
            '{"transaction":}',
            "{'transaction':'AA=='}",
            '{"transaction":"AA==",}',
            '{"transaction": NaN}',
            '{"max_tip": Infinity}',
            '{"transaction":"AA==" /* c */}',
            'undefined',
            '0x10',
            '01',
            '.5',
            '[,]',
            '{"a":1}{"b":2}',
            'true false',
            '"\\ud800"',
            '"\\u00"',
          ),
        )
        .map((text): BodySpec => ({ kind: 'text', text })),
    },
    {
      weight: 1,
      arbitrary: fc
        .uint8Array({ minLength: 0, maxLength: 512 })
        .map((bytes): BodySpec => ({ kind: 'bytes', bytes: [...bytes] })),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          fc.oneof(
            fc.integer({ min: 256 * 1024 - 64, max: 256 * 1024 + 64 }),
            fc.integer({ min: 100_000, max: 600_000 }),
          ),
          fc.constantFrom<'string' | 'array' | 'garbage'>('string', 'array', 'garbage'),
        )
        .map(([bytes, shape]): BodySpec => ({ kind: 'large', bytes, shape })),
    },
    { weight: 1, arbitrary: fc.constant<BodySpec>({ kind: 'none' }) },
  );
}

// ------------------------------------------------------------------------------------------------- headers

const contentType: fc.Arbitrary<string | null> = fc.oneof(
  { weight: 20, arbitrary: fc.constant('application/json') },
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'application/json; charset=utf-8',
      'application/json;charset=UTF-8',
      'APPLICATION/JSON',
      'application/json ; charset=utf-8',
      'application/json; charset=utf-16le',
      'application/json; charset=latin1',
      'application/json; charset=iso-8859-1',
      'application/json; charset=bogus',
      'application/json; charset=',
      'application/json; boundary=x',
      'application/json; charset=utf-8; charset=utf-16',
    ),
  },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'text/plain',
      'text/json',
      'application/jsonx',
      'application/json-patch+json',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=xyz',
      'application/octet-stream',
      'application/*',
      '*/*',
      'json',
      '',
      ';',
      'application/json\u00e9',
    ),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }) },
  { weight: 2, arbitrary: fc.constant(null) },
);

const authSpec: fc.Arbitrary<AuthSpec> = fc.oneof(
  { weight: 40, arbitrary: fc.constant<AuthSpec>({ kind: 'good' }) },
  { weight: 1, arbitrary: fc.constant<AuthSpec>({ kind: 'good-lowercase-scheme' }) },
  { weight: 2, arbitrary: fc.constant<AuthSpec>({ kind: 'missing' }) },
  { weight: 2, arbitrary: nastyString.map((token): AuthSpec => ({ kind: 'wrong', token })) },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom(
        'Bearer',
        'Bearer ',
        'Bearer  ',
        'Basic dXNlcjpwYXNz',
        'Token abc',
        'bearer',
        'Bearer\tx',
        '💥',
        'B'.repeat(8000),
        ', Bearer x',
      )
      .map((value): AuthSpec => ({ kind: 'raw', value })),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('x', ' x', '\u00e9', '=')
      .map((suffix): AuthSpec => ({ kind: 'good-plus', suffix })),
  },
);

/** Extra headers: harmless-looking and hostile ones, never ones node:http refuses to send. */
const extraHeaders: fc.Arbitrary<Array<[string, string]>> = fc.array(
  fc.oneof(
    fc.constantFrom<[string, string]>(
      ['accept', 'text/event-stream'],
      ['accept', 'application/json'],
      ['accept', '*/*;q=0.1, \u00e9'],
      ['accept-encoding', 'gzip, br'],
      ['x-forwarded-for', '1.2.3.4, ::1'],
      ['cookie', 'a=b; c'],
      ['range', 'bytes=0-10'],
      ['if-none-match', '*'],
      ['origin', 'http://evil.example'],
      ['x-http-method-override', 'DELETE'],
      ['cache-control', 'no-cache'],
      ['connection', 'close'],
      ['te', 'trailers'],
      ['x-request-id', 'x'.repeat(4000)],
    ),
    fc
      .tuple(fc.stringMatching(/^x-[a-z0-9-]{1,20}$/), fc.string({ unit: 'grapheme', maxLength: 40 }))
      .map(([name, value]): [string, string] => [name, stripControls(value)]),
  ),
  { maxLength: 3 },
);

const lastEventId: fc.Arbitrary<LastEventIdSpec> = fc.oneof(
  { weight: 2, arbitrary: fc.constant<LastEventIdSpec>({ kind: 'none' }) },
  {
    weight: 3,
    arbitrary: fc.nat({ max: 30 }).map((back): LastEventIdSpec => ({ kind: 'recent', back })),
  },
  {
    weight: 1,
    arbitrary: fc
      .oneof(
        fc.nat({ max: 50 }).map(String),
        fc.constantFrom(
          '0',
          '00',
          '-1',
          '1e3',
          '1.5',
          ' 7',
          '7 ',
          '999999999999999',
          '9999999999999999',
          '18446744073709551617',
          '',
          'x',
          '0x10',
        ),
        fc.stringMatching(/^[0-9]{1,20}$/),
      )
      .map((seq): LastEventIdSpec => ({ kind: 'this-boot', seq })),
  },
  {
    weight: 3,
    arbitrary: fc
      .oneof(
        nastyString,
        fc.stringMatching(/^[0-9a-f]{12}-[0-9]{1,6}$/),
        fc.constantFrom('-', '--', '-1', 'a-', '-5', 'abc-def-1', 'x'.repeat(5000), '\u00e9-1', 'boot-1-2'),
      )
      .map((value): LastEventIdSpec => ({ kind: 'other', value: value })),
  },
  {
    weight: 1,
    arbitrary: fc
      .array(fc.oneof(fc.nat({ max: 9 }).map(String), nastyString), { minLength: 2, maxLength: 3 })
      .map((values): LastEventIdSpec => ({
        kind: 'many',
        values,
      })),
  },
);

// ------------------------------------------------------------------------------------------------- paths

/** A path segment percent-encoded from UTF-8 bytes (lone surrogates included: encodeURIComponent would throw). */
export function encodeSegment(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

const rawSegment: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: nastyString.map(encodeSegment) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '%',
      '%z',
      '%zz',
      '%E0%A4%A',
      '%C0%AE',
      '%2e%2e',
      '..',
      '.',
      '%00',
      '%2F',
      '%252F',
      '\u00e9',
      '\u00ff\u00fe',
      '~',
      ';x=1',
      ':id',
      '*',
      '(.*)',
      'x'.repeat(3000),
    ),
  },
  { weight: 2, arbitrary: fc.webSegment() },
);

const txIdSegment: fc.Arbitrary<Array<string | Dyn>> = fc.oneof(
  { weight: 4, arbitrary: fc.nat().map((pick) => [new Dyn({ kind: 'tx-id', pick })]) },
  { weight: 2, arbitrary: fc.stringMatching(/^tx_[0-9A-HJKMNP-TV-Z]{26}$/).map((s) => [s]) },
  { weight: 4, arbitrary: rawSegment.map((s) => [s]) },
  { weight: 1, arbitrary: fc.constant<Array<string | Dyn>>([]) },
);

const bundleIdSegment: fc.Arbitrary<Array<string | Dyn>> = fc.oneof(
  { weight: 3, arbitrary: fc.nat().map((pick) => [new Dyn({ kind: 'bundle-id', pick })]) },
  { weight: 2, arbitrary: fc.stringMatching(/^[0-9a-f]{64}$/).map((s) => [s]) },
  {
    weight: 2,
    arbitrary: fc
      .oneof(
        fc.stringMatching(/^[0-9A-F]{64}$/),
        fc.stringMatching(/^[0-9a-f]{63}$/),
        fc.stringMatching(/^[0-9a-f]{65}$/),
        fc.stringMatching(/^[0-9a-g]{64}$/),
      )
      .map((s) => [s]),
  },
  { weight: 3, arbitrary: rawSegment.map((s) => [s]) },
);

/** A raw query string (without `?`), or empty. */
const queryString: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.constant('') },
  {
    weight: 2,
    arbitrary: fc
      .array(
        fc.tuple(
          fc.oneof(rawSegment, fc.constantFrom('last', 'model', 'provider', 'last[]', 'last[a]', 'uuid')),
          rawSegment,
        ),
        {
          minLength: 1,
          maxLength: 4,
        },
      )
      .map((pairs) => pairs.map(([k, v]) => `${k}=${v}`).join('&')),
  },
  { weight: 1, arbitrary: fc.webQueryParameters() },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '&',
      '=',
      '==',
      '&&&',
      '%',
      'a',
      'a=%zz',
      '?',
      '#frag',
      `a=${'b'.repeat(6000)}`,
    ),
  },
);

const lifecycleQuery: fc.Arbitrary<string> = fc.oneof(
  fc
    .oneof(
      fc.integer({ min: -5, max: 12_000 }).map(String),
      fc.constantFrom(
        '',
        'abc',
        '1e3',
        '1.5',
        '0x10',
        ' 5',
        '5 ',
        '+5',
        '%35',
        'Infinity',
        'NaN',
        '10000',
        '10001',
        '1e400',
        '١٢',
      ),
      nastyString.map(encodeSegment),
    )
    .map((v) => `last=${v}`),
  fc.constantFrom('last=1&last=2', 'last[]=3', 'last[a]=3', 'last', 'LAST=3', 'last=3&other=x'),
  queryString,
);

const presenceQuery: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.oneof(fc.constantFrom('claude-fuzz', 'm'), nastyString),
        fc.oneof(fc.constantFrom('anthropic', 'p'), nastyString),
      )
      .map(([m, p]) => `model=${encodeSegment(m)}&provider=${encodeSegment(p)}`),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'model=a',
      'provider=b',
      'model=&provider=',
      'model=%20&provider=%20',
      'model=a&model=b&provider=c',
      'model[]=a&provider=b',
      `model=${'m'.repeat(201)}&provider=p`,
      `model=${'m'.repeat(200)}&provider=p`,
      'model=%zz&provider=%E0%A4%A',
    ),
  },
  queryString,
);

// ------------------------------------------------------------------------------------------------- routes

type RouteShape = Pick<FuzzCase, 'route' | 'method' | 'path' | 'query' | 'body'> & { clean?: boolean };

const KNOWN_GETS = [
  '/healthz',
  '/status',
  '/tip',
  '/queue',
  '/policy',
  '/readyz',
  '/metrics',
  '/openapi.json',
  '/internal/mode',
  '/internal/agent/info',
];

const OTHER_METHODS = METHODS.filter((m) => m !== 'CONNECT' && m !== 'GET' && m !== 'POST');

/** A plainly valid enqueue, sent cleanly: the run's control group, whose transactions must all be kept. */
const cleanEnqueue: fc.Arbitrary<RouteShape> = fc
  .tuple(
    fc.nat(),
    fc.constantFrom<TxMutation>({ kind: 'valid' }, { kind: 'valid-base58' }),
    fc.constantFrom('low', 'normal', 'high'),
  )
  .map(([slot, m, priority]) => ({
    route: 'POST /tx/enqueue',
    method: 'POST',
    path: ['/tx/enqueue'],
    query: '',
    body: {
      kind: 'json',
      tpl: { transaction: new Dyn({ kind: 'tx', slot, mutation: m }), priority },
      prefix: '',
      suffix: '',
    },
    clean: true,
  }));

const route: fc.Arbitrary<RouteShape> = fc.oneof(
  { weight: 1, arbitrary: cleanEnqueue },
  {
    weight: 30,
    arbitrary: fc.tuple(bodyFrom(enqueueBody), queryString).map(([body, query]): RouteShape => ({
      route: 'POST /tx/enqueue',
      method: 'POST',
      path: ['/tx/enqueue'],
      query,
      body,
    })),
  },
  {
    weight: 9,
    arbitrary: fc.tuple(bodyFrom(submitBody), queryString).map(([body, query]): RouteShape => ({
      route: 'POST /internal/submit',
      method: 'POST',
      path: ['/internal/submit'],
      query,
      body,
    })),
  },
  {
    weight: 3,
    arbitrary: bodyFrom(modeBody).map((body): RouteShape => ({
      route: 'POST /internal/mode',
      method: 'POST',
      path: ['/internal/mode'],
      query: '',
      body,
    })),
  },
  {
    weight: 7,
    arbitrary: fc.tuple(txIdSegment, queryString).map(([id, query]): RouteShape => ({
      route: 'GET /tx/:id',
      method: 'GET',
      path: ['/tx/', ...id],
      query,
      body: { kind: 'none' },
    })),
  },
  {
    weight: 6,
    arbitrary: fc.tuple(txIdSegment, queryString).map(([id, query]): RouteShape => ({
      route: 'GET /tx/events/:id',
      method: 'GET',
      path: ['/tx/events/', ...id],
      query,
      body: { kind: 'none' },
    })),
  },
  {
    weight: 5,
    arbitrary: queryString.map((query): RouteShape => ({
      route: 'GET /internal/events',
      method: 'GET',
      path: ['/internal/events'],
      query,
      body: { kind: 'none' },
    })),
  },
  {
    weight: 4,
    arbitrary: presenceQuery.map((query): RouteShape => ({
      route: 'GET /internal/agent/presence',
      method: 'GET',
      path: ['/internal/agent/presence'],
      query,
      body: { kind: 'none' },
    })),
  },
  {
    weight: 5,
    arbitrary: lifecycleQuery.map((query): RouteShape => ({
      route: 'GET /lifecycle',
      method: 'GET',
      path: ['/lifecycle'],
      query,
      body: { kind: 'none' },
    })),
  },
  {
    weight: 5,
    arbitrary: fc.tuple(bundleIdSegment, queryString).map(([id, query]): RouteShape => ({
      route: 'GET /bundle/:id',
      method: 'GET',
      path: ['/bundle/', ...id],
      query,
      body: { kind: 'none' },
    })),
  },
  {
    weight: 7,
    arbitrary: fc.tuple(fc.constantFrom(...KNOWN_GETS), queryString).map(([path, query]): RouteShape => ({
      route: `GET ${path}`,
      method: 'GET',
      path: [path],
      query,
      body: { kind: 'none' },
    })),
  },
  {
    weight: 5,
    arbitrary: fc
      .tuple(
        fc.constantFrom(...OTHER_METHODS),
        fc.constantFrom(
          '/tx/enqueue',
          '/internal/submit',
          '/internal/mode',
          '/status',
          '/healthz',
          '/policy',
          '/internal/events',
          '/tx/abc',
          '/bundle/abc',
          '/',
        ),
        bodyFrom(anyBody),
      )
      .map(([method, path, body]): RouteShape => ({
        route: 'other methods',
        method,
        path: [path],
        query: '',
        body,
      })),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.constantFrom('GET', 'POST'),
        fc.constantFrom('/tx/enqueue', '/internal/submit', '/healthz', '/status', '/openapi.json'),
        bodyFrom(anyBody),
      )
      .map(([method, path, body]): RouteShape => ({
        route: 'wrong method',
        method,
        path: [path],
        query: '',
        // GET on the POST routes, POST on the GET routes.
        body: method === 'POST' ? body : { kind: 'none' },
      }))
      .filter(
        (r) => (r.method === 'GET') === (r.path[0] === '/tx/enqueue' || r.path[0] === '/internal/submit'),
      ),
  },
  {
    weight: 6,
    arbitrary: fc
      .tuple(
        fc.constantFrom('GET', 'POST', 'HEAD', 'DELETE'),
        fc.oneof(
          fc.webPath().map((p) => (p.startsWith('/') ? p : `/${p}`)),
          fc.array(rawSegment, { minLength: 1, maxLength: 4 }).map((s) => `/${s.join('/')}`),
          fc.constantFrom(
            '/tx',
            '/tx/',
            '/tx/events',
            '/tx/events/',
            '/bundle',
            '/bundle/',
            '/internal',
            '/internal/',
            '//status',
            '/status/',
            '/STATUS',
            '/status%00',
            '/tx/enqueue/',
            '/tx//enqueue',
            '/.env',
            '/index.html',
            '/internal/agent',
            '/tx/events/a/b',
            '/tx/a/b',
            '/bundle/a/b',
          ),
        ),
        bodyFrom(anyBody),
      )
      .map(([method, path, body]): RouteShape => ({
        route: 'unknown routes',
        method,
        path: [path],
        query: '',
        body: method === 'POST' ? body : { kind: 'none' },
      })),
  },
);

const fuzzCase: fc.Arbitrary<FuzzCase> = fc
  .tuple(
    route,
    contentType,
    fc.oneof(
      { weight: 12, arbitrary: fc.constant<'utf8'>('utf8') },
      fc.constantFrom<'utf16le' | 'latin1'>('utf16le', 'latin1'),
    ),
    fc.oneof(
      { weight: 24, arbitrary: fc.constant<ContentEncoding>('none') },
      fc.constantFrom<ContentEncoding>('identity', 'gzip', 'deflate', 'br', 'gzip-garbage', 'bogus'),
    ),
    fc.oneof({ weight: 6, arbitrary: fc.constant<'length'>('length') }, fc.constant<'chunked'>('chunked')),
    authSpec,
    lastEventId,
    extraHeaders,
  )
  .map(([{ clean, ...r }, type, charset, contentEncoding, framing, auth, lei, extra]): FuzzCase =>
    clean
      ? {
          ...r,
          contentType: 'application/json',
          charset: 'utf8',
          contentEncoding: 'none',
          framing: 'length',
          auth: { kind: 'good' },
          lastEventId: { kind: 'none' },
          extraHeaders: [],
        }
      : {
          ...r,
          // Requests without a body mostly carry no content type, as real clients send them.
          contentType: r.body.kind === 'none' && type === 'application/json' ? null : type,
          charset,
          contentEncoding: r.body.kind === 'none' ? 'none' : contentEncoding,
          framing,
          auth,
          lastEventId: r.route.includes('events') || r.route.includes('presence') ? lei : { kind: 'none' },
          extraHeaders: extra,
        },
  );

/** `count` request descriptions, reproducible from `seed`. */
export function generateCases(seed: number, count: number): FuzzCase[] {
  return fc.sample(fuzzCase, { seed, numRuns: count });
}

// ------------------------------------------------------------------------------------------------- materialise

export interface MaterialiseContext {
  token: string;
  bootId: string;
  /** The sequence number of the hub's newest event. */
  lastSeq(): number;
  /** The pool's transaction for `slot`, mutated. */
  tx(slot: number, mutation: TxMutation): EncodedTx;
  txId(pick: number): string;
  bundleId(pick: number): string;
}

export interface Materialised {
  request: RawRequest;
  /** Size of the request line and headers (node refuses more than 16 KiB with a bare 431). */
  headBytes: number;
  /** The request carries a transaction the sidecar must refuse (unsigned, corrupted, oversize, mis-encoded). */
  mustRefuse: boolean;
  /** The Last-Event-ID value the server will see (node joins repeated headers with ", " and trims), if any. */
  lastEventId: string | undefined;
  /** Per-transaction details for `transaction`/`transactions` bodies, to judge a 2xx. */
  txs: EncodedTx[];
}

function renderTpl(tpl: Tpl, ctx: MaterialiseContext, txs: EncodedTx[]): string {
  if (tpl instanceof Dyn) {
    const ref = tpl.ref;
    switch (ref.kind) {
      case 'raw':
        return ref.text;
      case 'tx': {
        const encoded = ctx.tx(ref.slot, ref.mutation);
        txs.push(encoded);
        return JSON.stringify(encoded.text);
      }
      case 'tx-id':
        return JSON.stringify(ctx.txId(ref.pick));
      case 'bundle-id':
        return JSON.stringify(ctx.bundleId(ref.pick));
    }
  }
  if (Array.isArray(tpl)) return `[${tpl.map((t) => renderTpl(t, ctx, txs)).join(',')}]`;
  if (tpl !== null && typeof tpl === 'object') {
    return `{${Object.entries(tpl)
      .map(([k, v]) => `${JSON.stringify(k)}:${renderTpl(v, ctx, txs)}`)
      .join(',')}}`;
  }
  return JSON.stringify(tpl) ?? 'null';
}

function largeBody(bytes: number, shape: 'string' | 'array' | 'garbage'): string {
  if (shape === 'string') return `{"transaction":"${'A'.repeat(Math.max(0, bytes - 18))}"}`;
  if (shape === 'array') {
    const items = Math.max(1, Math.floor(bytes / 7));
    return `{"transactions":[${Array.from({ length: items }, () => '"AAAA"').join(',')}]}`;
  }
  return 'x'.repeat(bytes);
}

/** A header value node:http will send: no control characters, UTF-8 bytes beyond Latin-1. */
function headerText(value: string): string {
  return wireHeader(stripControls(value));
}

/** Turn a description into bytes on the wire, filling in its run-time parts. */
export function materialise(c: FuzzCase, ctx: MaterialiseContext): Materialised {
  const txs: EncodedTx[] = [];
  let text: string | null = null;
  let bytes: Buffer | undefined;
  let declaredEncoding: unknown;
  switch (c.body.kind) {
    case 'none':
      break;
    case 'json': {
      text = c.body.prefix + renderTpl(c.body.tpl, ctx, txs) + c.body.suffix;
      const tpl = c.body.tpl;
      if (tpl !== null && typeof tpl === 'object' && !Array.isArray(tpl) && !(tpl instanceof Dyn)) {
        declaredEncoding = 'encoding' in tpl ? tpl.encoding : 'base64';
        // With no `encoding` of its own, the body names the one the mutations ask for (base58, or a mislabel).
        if (!('encoding' in tpl) && txs.length > 0 && txs.every((t) => t.label === 'base58')) {
          text = `${c.body.prefix}${renderTpl({ ...tpl, encoding: 'base58' }, ctx, [])}${c.body.suffix}`;
          declaredEncoding = 'base58';
        }
      }
      break;
    }
    case 'truncated-json': {
      const full = renderTpl(c.body.tpl, ctx, txs);
      text = full.slice(0, full.length > 0 ? c.body.cut % full.length : 0);
      break;
    }
    case 'text':
      text = c.body.text;
      break;
    case 'bytes':
      bytes = Buffer.from(c.body.bytes);
      break;
    case 'large':
      text = largeBody(c.body.bytes, c.body.shape);
      break;
  }
  if (text !== null) bytes = Buffer.from(text, c.charset);
  if (bytes !== undefined) {
    // Fastest settings: what is under test is the server's decoding, not the ratio.
    if (c.contentEncoding === 'gzip') bytes = gzipSync(bytes, { level: 1 });
    else if (c.contentEncoding === 'deflate') bytes = deflateSync(bytes, { level: 1 });
    else if (c.contentEncoding === 'br')
      bytes = brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 1 } });
    else if (c.contentEncoding === 'gzip-garbage')
      bytes = Buffer.concat([Buffer.from([0x1f, 0x8b, 8, 0]), bytes]);
  }

  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of c.extraHeaders) headers[name] = headerText(value);
  if (c.contentType !== null) headers['content-type'] = headerText(c.contentType);
  if (c.contentEncoding !== 'none' && bytes !== undefined) {
    headers['content-encoding'] = c.contentEncoding === 'gzip-garbage' ? 'gzip' : c.contentEncoding;
  }
  switch (c.auth.kind) {
    case 'good':
      headers.authorization = `Bearer ${ctx.token}`;
      break;
    case 'good-lowercase-scheme':
      headers.authorization = `bearer ${ctx.token}`;
      break;
    case 'missing':
      break;
    case 'wrong':
      headers.authorization = headerText(`Bearer ${c.auth.token}`);
      break;
    case 'raw':
      headers.authorization = headerText(c.auth.value);
      break;
    case 'good-plus':
      headers.authorization = headerText(`Bearer ${ctx.token}${c.auth.suffix}`);
      break;
  }
  let lastEventId: string | undefined;
  const lei = c.lastEventId;
  if (lei.kind !== 'none') {
    const values =
      lei.kind === 'this-boot'
        ? [`${ctx.bootId}-${lei.seq}`]
        : lei.kind === 'recent'
          ? [`${ctx.bootId}-${Math.max(0, ctx.lastSeq() - lei.back)}`]
          : lei.kind === 'other'
            ? [lei.value]
            : lei.values;
    const wire = values.map(headerText);
    headers['last-event-id'] = wire.length === 1 ? (wire[0] as string) : wire;
    lastEventId = wire.join(', ').replace(/^[ \t]+|[ \t]+$/g, '');
  }

  let path = c.path
    .map((p) => {
      if (typeof p === 'string') return p;
      if (p.ref.kind === 'tx-id') return encodeSegment(ctx.txId(p.ref.pick));
      if (p.ref.kind === 'bundle-id') return encodeSegment(ctx.bundleId(p.ref.pick));
      return '';
    })
    .join('');
  if (c.query !== '') path += `?${c.query}`;
  // A request target is ASCII (RFC 9112): percent-encode anything else as its UTF-8 bytes. Raw bytes in the request
  // line are refused by node's HTTP parser before relay sees the request; the framing cases cover those.
  path = path.replace(/[^\u0021-\u007e]/gu, (ch) => encodeSegment(ch));

  // Text in one encoding decoded as the other is garbage (or fails to decode): it must be refused too.
  const mustRefuse =
    txs.some((t) => t.corrupt) ||
    (declaredEncoding !== undefined && txs.some((t) => t.format !== declaredEncoding));
  const headBytes =
    c.method.length +
    path.length +
    Object.entries(headers).reduce(
      (n, [k, v]) => n + k.length + 4 + (Array.isArray(v) ? v.join('').length + 4 * v.length : v.length),
      0,
    );
  return {
    headBytes,
    request: {
      method: c.method,
      path,
      headers,
      ...(bytes !== undefined ? { body: bytes } : {}),
      framing: c.framing,
    },
    mustRefuse,
    lastEventId,
    txs,
  };
}
