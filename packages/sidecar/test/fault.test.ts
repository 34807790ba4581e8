import { attributeFault, type FaultCause, type FaultEvidence } from '../src/track/fault';

/** Whose fault a lost attempt was, for every source of a verdict: one pure judge. */

const tx = { signatures: ['userSig'] };
type Attempt = Parameters<typeof attributeFault>[1];
const alone: Attempt = { tip_signature: 'tipSig', passengers: [] };
const pack: Attempt = {
  tip_signature: 'tipSig',
  passengers: [{ tx_id: 'tx_rider', signatures: ['riderSig'] }],
};

function judge(attempt: Attempt, cause: FaultCause, evidence?: FaultEvidence) {
  const v = attributeFault(tx, attempt, cause, evidence);
  return {
    blame: v.blame,
    outcome: v.outcome,
    retry: v.countRetry,
    exclude: v.exclude,
    held: v.tipperHeld,
    stop: v.stop,
    forget: v.forgetBlockhash,
  };
}

type EngineOutcome = Extract<FaultCause, { source: 'engine-result' }>['outcome'];
const result = (outcome: EngineOutcome, failedSignature: string | null): FaultCause => ({
  source: 'engine-result',
  outcome,
  detail: 'why',
  failedSignature,
});

describe('a gRPC bundle result', () => {
  test("relay's own tip failing holds the tipper and costs the user nothing", () => {
    expect(judge(alone, result('simulation_failed', 'tipSig'))).toMatchObject({
      blame: 'tip',
      outcome: 'dropped',
      retry: false,
      held: 'why',
    });
  });
  test('a rider named by the engine rides no more; the carrier loses no retry', () => {
    expect(judge(pack, result('simulation_failed', 'riderSig'))).toMatchObject({
      blame: 'rider',
      retry: false,
      exclude: { txId: 'tx_rider' },
      held: null,
    });
  });
  test('a pack failing with no member named: nobody rides again, no fatal verdict for the carrier', () => {
    expect(judge(pack, result('simulation_failed', null))).toMatchObject({
      blame: 'pack',
      outcome: 'dropped',
      retry: false,
      exclude: 'pack',
    });
  });
  test("the carrier's own failure, alone or packed, is its own: the outcome stands and a retry is counted", () => {
    expect(judge(alone, result('simulation_failed', 'userSig'))).toMatchObject({
      blame: 'user',
      outcome: 'simulation_failed',
      retry: true,
    });
    expect(judge(pack, result('simulation_failed', 'userSig'))).toMatchObject({ blame: 'user', retry: true });
    expect(judge(alone, result('fee_too_low', null))).toMatchObject({
      blame: 'auction',
      outcome: 'fee_too_low',
      retry: true,
    });
  });
});

describe("the engine's refusal of a send", () => {
  const refusal = (rejection: 'blockhash_expired' | 'invalid_bundle' | 'dropped'): FaultCause => ({
    source: 'engine-refusal',
    rejection,
    message: 'no',
  });
  test("an expired blockhash: the user's stops the transaction; else the tip's is forgotten", () => {
    expect(judge(alone, refusal('blockhash_expired'), { userBlockhashDead: true })).toMatchObject({
      blame: 'user',
      stop: true,
      retry: false,
    });
    expect(judge(alone, refusal('blockhash_expired'), { userBlockhashDead: false })).toMatchObject({
      blame: 'tip',
      forget: true,
      retry: false,
    });
  });
  test("the user's dead blockhash outranks a rider: nothing of the transaction can be sent again", () => {
    const riderFault = { txId: 'tx_rider', detail: 'its blockhash is dead' };
    expect(judge(pack, refusal('blockhash_expired'), { userBlockhashDead: true, riderFault })).toMatchObject({
      blame: 'user',
      stop: true,
      exclude: null,
    });
  });
  test('a rider at fault costs the carrier nothing, whatever the refusal (an unrecognised one included)', () => {
    const riderFault = { txId: 'tx_rider', detail: 'its blockhash is dead' };
    for (const r of ['blockhash_expired', 'dropped'] as const)
      expect(judge(pack, refusal(r), { riderFault })).toMatchObject({
        blame: 'rider',
        retry: false,
        exclude: { txId: 'tx_rider' },
      });
  });
  test('invalid: a pack goes apart without blame; a bundle alone is invalid', () => {
    expect(judge(pack, refusal('invalid_bundle'))).toMatchObject({
      blame: 'pack',
      exclude: 'pack',
      retry: false,
    });
    expect(judge(alone, refusal('invalid_bundle'))).toMatchObject({
      outcome: 'invalid_bundle',
      retry: false,
    });
  });
  test('a refusal that says nothing of the bundle is a lost auction: retried', () => {
    expect(judge(alone, refusal('dropped'))).toMatchObject({
      blame: 'auction',
      outcome: 'dropped',
      retry: true,
    });
  });
  test("an unrecognised refusal of a pack, no rider named: the pack goes apart, the carrier's retries untouched", () => {
    expect(judge(pack, refusal('dropped'))).toMatchObject({
      blame: 'pack',
      exclude: 'pack',
      retry: false,
    });
  });
});

describe('a window passed without a landing (JSON-RPC)', () => {
  const window = (belowFloor: boolean): FaultCause => ({ source: 'window', detail: 'passed', belowFloor });
  test('blame goes, in order: the user, a rider, the tip, the auction', () => {
    const userFault = { outcome: 'insufficient_funds' as const, detail: 'payer empty' };
    const riderFault = { txId: 'tx_rider', detail: 'cannot execute' };
    const tipFault = { detail: 'tipper short' };
    expect(judge(pack, window(false), { userFault, riderFault, tipFault })).toMatchObject({
      blame: 'user',
      outcome: 'insufficient_funds',
      retry: true,
    });
    expect(judge(pack, window(false), { riderFault, tipFault })).toMatchObject({
      blame: 'rider',
      retry: false,
    });
    expect(judge(alone, window(false), { tipFault })).toMatchObject({
      blame: 'tip',
      held: 'tipper short',
      retry: false,
    });
    expect(judge(alone, window(true))).toMatchObject({
      blame: 'auction',
      outcome: 'fee_too_low',
      retry: true,
    });
    expect(judge(alone, window(false))).toMatchObject({ blame: 'auction', outcome: 'dropped', retry: true });
  });
});

describe("an engine's fatal verdict, re-checked on relay's own RPC", () => {
  const fatal = result('insufficient_funds', 'userSig');
  test("relay's view reproduces it: failed, with relay's own class", () => {
    expect(
      judge(alone, fatal, {
        engineRecheck: { kind: 'reproduced', outcome: 'simulation_failed', detail: 'fails' },
      }),
    ).toMatchObject({ blame: 'user', outcome: 'simulation_failed', retry: true });
  });
  test("relay's view executes it (the engine's bank lagged): not fatal, sent again, no retry counted", () => {
    expect(judge(alone, fatal, { engineRecheck: { kind: 'cleared', detail: 'ok' } })).toMatchObject({
      blame: 'engine',
      outcome: 'dropped',
      retry: false,
    });
  });
  test('the RPC could not answer: no proof either way, so not fatal, but a retry counted', () => {
    expect(judge(alone, fatal, { engineRecheck: { kind: 'unavailable', detail: 'down' } })).toMatchObject({
      blame: 'engine',
      outcome: 'dropped',
      retry: true,
    });
  });
  test("the bytes are gone (nothing to simulate): the engine's word stands, as before", () => {
    expect(judge(alone, fatal, { engineRecheck: { kind: 'unverifiable' } })).toMatchObject({
      blame: 'user',
      outcome: 'insufficient_funds',
    });
  });
  test('a retryable outcome is never re-checked into anything else', () => {
    expect(
      judge(alone, result('dropped', 'userSig'), {
        engineRecheck: { kind: 'reproduced', outcome: 'simulation_failed', detail: 'x' },
      }),
    ).toMatchObject({ blame: 'auction', outcome: 'dropped' });
  });
});
