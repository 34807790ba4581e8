// On a 1366x768 laptop the queue panel is ~330 px wide and clips what does not fit: every column of the queue table
// (the state column last, "pend" / "confi" when it was cut off) must be visible inside the panel.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import pino from 'pino';
import { configFromEnv, startSidecar, type Sidecar } from '@solrelay/sidecar';
import { post, startStack, type Stack } from '@solrelay/testkit';

const WEB_DIST = join(__dirname, '..', 'dist');
const ARTIFACTS = join(__dirname, '..', 'artifacts');
const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

let browser: Browser;
let stack: Stack<Sidecar>;

beforeAll(async () => {
  [browser, stack] = await Promise.all([
    chromium.launch({ executablePath: '/usr/bin/chromium', args: ARGS, headless: true }),
    startStack({
      env: { BYPASS_AGENT: '1', SIMNET_SLOT_MS: '200' },
      start: (env, dir) =>
        startSidecar(configFromEnv(env, dir), {
          logger: pino({ level: 'silent' }),
          webDist: WEB_DIST,
          intervals: { tipFloorMs: 300, balanceMs: 300, leadersMs: 1000, rpcSlotMs: 100, blockHeightMs: 200 },
        }),
    }),
  ]);
});

afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

test('queue table fits its panel at 1366x768 (the state column is not clipped)', async () => {
  const page = await browser.newPage({ viewport: { width: 1366, height: 768 } });
  await page.goto(stack.sidecar.url + '/');
  for (let i = 0; i < 4; i += 1) {
    expect(
      (await post(stack.sidecar.url, '/tx/enqueue', { transaction: stack.transfer(3_000 + i) })).status,
    ).toBe(202);
  }
  await page.waitForSelector('[data-testid="queue-table"] tbody tr', { timeout: 15_000 });
  const geometry = await page.evaluate(() => {
    const table = document.querySelector('[data-testid="queue-table"]') as HTMLElement;
    const panel = table.closest('section') as HTMLElement;
    const cells = [...table.querySelectorAll('tbody tr:first-child td, thead th')] as HTMLElement[];
    const panelRight = panel.getBoundingClientRect().right;
    return {
      panelRight,
      tableScroll: table.parentElement
        ? table.parentElement.scrollWidth - table.parentElement.clientWidth
        : 0,
      overflowing: cells
        .filter(
          (c) => c.getBoundingClientRect().right > panelRight + 0.5 || c.scrollWidth > c.clientWidth + 1,
        )
        .map((c) => c.textContent),
    };
  });
  // The page opened seconds ago: the screenshot also shows the tip chart of a fresh page.
  await mkdir(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, 'queue-fits-1366x768.png') });
  expect(geometry.overflowing).toEqual([]);
}, 40_000);
