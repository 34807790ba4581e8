import { CORE_PLACEHOLDER } from '../src';

test('core builds and loads', () => {
  expect(CORE_PLACEHOLDER).toBe(true);
});
