import { ChainPosition } from '../src/chain/position';

/** Feed `count` slots `ms` apart from `from` (slot and time), returning where it ended. */
function feed(position: ChainPosition, from: { slot: number; at: number }, count: number, ms: number) {
  let { slot, at } = from;
  for (let i = 0; i < count; i++) {
    slot += 1;
    at += ms;
    position.advance(slot);
    position.observeSlotTime(slot, at);
  }
  return { slot, at };
}

test("mainnet's 400 ms until half a window of slots has been seen, then the measured time", () => {
  const position = new ChainPosition();
  const end = feed(position, { slot: 100, at: 0 }, 20, 200);
  expect(position.slotMs).toBe(400);
  feed(position, end, 20, 200);
  expect(position.slotMs).toBe(200);
});

test('a stall and a burst of slots delivered at once do not move the measure', () => {
  const position = new ChainPosition();
  let at = feed(position, { slot: 100, at: 0 }, 64, 400);
  expect(position.slotMs).toBe(400);
  // 3.2 s with nothing, then eight slots within 8 ms (a stream catching up), then slots as usual.
  at = feed(position, { slot: at.slot, at: at.at + 3_200 }, 8, 1);
  expect(position.slotMs).toBe(400);
  at = feed(position, at, 30, 400);
  expect(position.slotMs).toBe(400);
  // A paused event loop: ten slots late, delivered in a bunch, inside a steady window.
  at = feed(position, { slot: at.slot, at: at.at + 1_500 }, 10, 2);
  feed(position, at, 10, 400);
  expect(position.slotMs).toBe(400);
});

test('skipped slots count by slot number, not by arrival', () => {
  const position = new ChainPosition();
  let { slot, at } = { slot: 100, at: 0 };
  for (let i = 0; i < 64; i++) {
    slot += i % 4 === 0 ? 2 : 1; // a skipped slot every fourth: 800 ms for two slots
    at += i % 4 === 0 ? 800 : 400;
    position.advance(slot);
    position.observeSlotTime(slot, at);
  }
  expect(position.slotMs).toBe(400);
});
