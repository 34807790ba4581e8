import { choosePassengers, type PackCandidate } from '../src/packing';

const c = (item: string, writeLocks: string[], transactions = 1, lookups = false): PackCandidate<string> => ({
  item,
  writeLocks,
  transactions,
  lookups,
});

describe('choosePassengers', () => {
  const lead = { transactions: 1, writeLocks: ['payerA', 'dest1'], lookups: false };

  test('takes candidates in order while they lock nothing in common, up to four user transactions', () => {
    const picked = choosePassengers(lead, [
      c('b', ['payerB', 'dest2']),
      c('c', ['payerC', 'dest3']),
      c('d', ['payerD', 'dest4']),
      c('e', ['payerE', 'dest5']),
    ]);
    expect(picked).toEqual(['b', 'c', 'd']);
  });

  test('skips a candidate that writes what the lead or an earlier passenger writes, and goes on', () => {
    const picked = choosePassengers(lead, [
      c('samePayer', ['payerA', 'dest9']),
      c('b', ['payerB', 'pool']),
      c('samePool', ['payerC', 'pool']),
      c('d', ['payerD', 'dest4']),
    ]);
    expect(picked).toEqual(['b', 'd']);
  });

  test('counts every user transaction of a candidate, and skips one that would not fit', () => {
    const picked = choosePassengers(lead, [
      c('three', ['x', 'y'], 3),
      c('two', ['p', 'q'], 2),
      c('one', ['r']),
    ]);
    expect(picked).toEqual(['three']);
    expect(choosePassengers(lead, [c('two', ['p'], 2), c('one', ['r']), c('more', ['s'])])).toEqual([
      'two',
      'one',
    ]);
  });

  test('nothing rides with address-table lookups (unknown locks), nor past the configured maximum', () => {
    expect(choosePassengers({ ...lead, lookups: true }, [c('b', ['payerB'])])).toEqual([]);
    expect(choosePassengers(lead, [c('alt', ['payerB'], 1, true), c('b', ['payerC'])])).toEqual(['b']);
    expect(choosePassengers(lead, [c('b', ['payerB']), c('c', ['payerC'])], 2)).toEqual(['b']);
    expect(choosePassengers(lead, [c('b', ['payerB'])], 1)).toEqual([]);
    expect(choosePassengers({ ...lead, transactions: 4 }, [c('b', ['payerB'])])).toEqual([]);
    // The bundle limit holds whatever is configured.
    expect(
      choosePassengers(lead, [c('b', ['b']), c('c', ['c']), c('d', ['d']), c('e', ['e'])], 9),
    ).toHaveLength(3);
  });
});
