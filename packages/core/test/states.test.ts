import {
  QUEUED_TX_STATES,
  TERMINAL_TX_STATES,
  TX_STATES,
  bundleStagePath,
  canTransition,
  isRelayError,
  isTerminalTxState,
  txTransitionPath,
  type TxState,
} from '../src';

// Written out by hand from DESIGN §2, not derived from the implementation's table.
const LEGAL_MOVES: Array<[TxState, TxState, TxState[]]> = [
  ['pending', 'submitted', ['submitted']],
  ['submitted', 'landed', ['landed']],
  ['landed', 'processed', ['processed']],
  ['processed', 'confirmed', ['confirmed']],
  ['confirmed', 'finalized', ['finalized']],
  // observations that skip states emit the skipped ones in order
  ['submitted', 'confirmed', ['landed', 'processed', 'confirmed']],
  ['submitted', 'processed', ['landed', 'processed']],
  ['submitted', 'finalized', ['landed', 'processed', 'confirmed', 'finalized']],
  ['landed', 'finalized', ['processed', 'confirmed', 'finalized']],
  ['processed', 'finalized', ['confirmed', 'finalized']],
  ['pending', 'landed', ['submitted', 'landed']],
  ['pending', 'processed', ['submitted', 'landed', 'processed']],
  ['pending', 'confirmed', ['submitted', 'landed', 'processed', 'confirmed']],
  ['pending', 'finalized', ['submitted', 'landed', 'processed', 'confirmed', 'finalized']],
  ['landed', 'confirmed', ['processed', 'confirmed']],
  // re-pend moves
  ['submitted', 'pending', ['pending']],
  ['landed', 'pending', ['pending']],
  ['processed', 'pending', ['pending']],
  // any non-terminal state can expire or fail
  ['pending', 'expired', ['expired']],
  ['submitted', 'expired', ['expired']],
  ['landed', 'expired', ['expired']],
  ['processed', 'expired', ['expired']],
  ['confirmed', 'expired', ['expired']],
  ['pending', 'failed', ['failed']],
  ['submitted', 'failed', ['failed']],
  ['landed', 'failed', ['failed']],
  ['processed', 'failed', ['failed']],
  ['confirmed', 'failed', ['failed']],
];

const ILLEGAL_MOVES: Array<[TxState, TxState]> = [
  // terminal states never move
  ['finalized', 'pending'],
  ['finalized', 'confirmed'],
  ['finalized', 'failed'],
  ['finalized', 'expired'],
  ['failed', 'pending'],
  ['failed', 'submitted'],
  ['failed', 'finalized'],
  ['failed', 'expired'],
  ['expired', 'pending'],
  ['expired', 'submitted'],
  ['expired', 'failed'],
  ['expired', 'finalized'],
  // no demotion other than the re-pend moves
  ['confirmed', 'pending'],
  ['confirmed', 'processed'],
  ['confirmed', 'landed'],
  ['processed', 'landed'],
  ['processed', 'submitted'],
  ['landed', 'submitted'],
  // a same-state observation is not a move
  ['pending', 'pending'],
  ['submitted', 'submitted'],
  ['confirmed', 'confirmed'],
];

const LEGAL_SEQUENCES: TxState[][] = [
  ['pending', 'submitted', 'landed', 'processed', 'confirmed', 'finalized'],
  ['pending', 'submitted', 'pending', 'submitted', 'confirmed', 'finalized'],
  ['pending', 'submitted', 'landed', 'pending', 'submitted', 'processed', 'pending', 'expired'],
  ['pending', 'submitted', 'pending', 'submitted', 'pending', 'failed'],
  ['pending', 'expired'],
  ['pending', 'submitted', 'failed'],
  ['pending', 'finalized'],
  ['pending', 'submitted', 'landed', 'processed', 'confirmed', 'failed'],
];

const ILLEGAL_SEQUENCES: TxState[][] = [
  ['pending', 'submitted', 'landed', 'submitted'],
  ['pending', 'submitted', 'confirmed', 'pending'],
  ['pending', 'submitted', 'finalized', 'pending'],
  ['pending', 'failed', 'pending'],
  ['pending', 'expired', 'submitted'],
  ['pending', 'submitted', 'confirmed', 'processed'],
  ['pending', 'pending'],
];

function accepts(sequence: TxState[]): boolean {
  for (let i = 1; i < sequence.length; i += 1) {
    const from = sequence[i - 1] as TxState;
    const to = sequence[i] as TxState;
    if (!canTransition(from, to)) return false;
  }
  return true;
}

describe('transaction states', () => {
  it('has exactly the eight states of the spec, three terminal', () => {
    expect([...TX_STATES].sort()).toEqual(
      ['confirmed', 'expired', 'failed', 'finalized', 'landed', 'pending', 'processed', 'submitted'].sort(),
    );
    expect([...TERMINAL_TX_STATES].sort()).toEqual(['expired', 'failed', 'finalized']);
    expect(isTerminalTxState('confirmed')).toBe(false);
    expect(isTerminalTxState('expired')).toBe(true);
  });

  it('the queued states are the other five, in forward order (GET /queue counts each)', () => {
    expect(QUEUED_TX_STATES).toEqual(['pending', 'submitted', 'landed', 'processed', 'confirmed']);
    for (const state of TX_STATES) {
      expect((QUEUED_TX_STATES as readonly TxState[]).includes(state)).toBe(!isTerminalTxState(state));
    }
  });

  it.each(LEGAL_MOVES)('%s -> %s is legal and emits %j', (from, to, emitted) => {
    expect(canTransition(from, to)).toBe(true);
    expect(txTransitionPath(from, to)).toEqual(emitted);
  });

  it.each(ILLEGAL_MOVES)('%s -> %s is illegal', (from, to) => {
    expect(canTransition(from, to)).toBe(false);
    let thrown: unknown;
    try {
      txTransitionPath(from, to);
    } catch (error) {
      thrown = error;
    }
    expect(isRelayError(thrown, 'RELAY_E_TX_ILLEGAL_TRANSITION')).toBe(true);
    expect((thrown as { details: { from: string; to: string } }).details).toEqual({ from, to });
  });

  it('the hand-written move lists cover every ordered pair exactly once', () => {
    const listed = new Set([
      ...LEGAL_MOVES.map(([a, b]) => `${a}>${b}`),
      ...ILLEGAL_MOVES.map(([a, b]) => `${a}>${b}`),
    ]);
    expect(listed.size).toBe(LEGAL_MOVES.length + ILLEGAL_MOVES.length);
    // Pairs not listed by hand must be illegal: only the hand-written legal list may pass.
    for (const from of TX_STATES) {
      for (const to of TX_STATES) {
        if (!listed.has(`${from}>${to}`))
          expect([from, to, canTransition(from, to)]).toEqual([from, to, false]);
      }
    }
  });

  it.each(LEGAL_SEQUENCES.map((s) => [s.join(' > '), s]))('accepts %s', (_name, sequence) => {
    expect(accepts(sequence as TxState[])).toBe(true);
  });

  it.each(ILLEGAL_SEQUENCES.map((s) => [s.join(' > '), s]))('refuses %s', (_name, sequence) => {
    expect(accepts(sequence as TxState[])).toBe(false);
  });
});

describe('bundle stages', () => {
  it('walks forward, emitting skipped stages', () => {
    expect(bundleStagePath('submitted', 'confirmed')).toEqual(['landed', 'processed', 'confirmed']);
    expect(bundleStagePath('landed', 'failed')).toEqual(['failed']);
  });

  it('never moves back or out of a terminal stage', () => {
    expect(() => bundleStagePath('confirmed', 'landed')).toThrow('Illegal state move');
    expect(() => bundleStagePath('finalized', 'failed')).toThrow('Illegal state move');
    expect(() => bundleStagePath('failed', 'submitted')).toThrow('Illegal state move');
  });
});
