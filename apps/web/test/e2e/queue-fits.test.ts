// On a 1366x768 laptop the queue panel is ~330 px wide and clips what does not fit: every column of the queue table
// (the state column last, "pend" / "confi" when it was cut off) must be visible inside the panel. And the state
// column and the counts above it are the sidecar's (#18): a transaction confirmed before the page opened is shown
// confirmed, not pending.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import pino from 'pino';
import { configFromEnv, startSidecar, type Sidecar } from '@solrelay/sidecar';
import { get, post, startStack, stepSlotsUntil, waitUntil, type Stack } from '@solrelay/testkit';

const WEB_DIST = join(__dirname, '..', '..', 'dist');
const ARTIFACTS = join(__dirname, '..', '..', 'artifacts');
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

test('a transaction confirmed before the page opened shows confirmed in the queue, and is counted so', async () => {
  const { url } = stack.sidecar;
  await waitUntil(async () => (await get(url, '/queue')).body.pending === 0, 30_000, 'the queue to empty');
  const { cluster } = stack.simnet;
  // By hand from here, so the transaction holds at confirmed (finalized is 30 slots further) while the page reads.
  cluster.stop();
  try {
    const enqueued = await post(url, '/tx/enqueue', { transaction: stack.transfer(3_100) });
    expect(enqueued.status).toBe(202);
    const txId: string = enqueued.body.tx_id;
    await stepSlotsUntil(
      stack,
      async () => (await get(url, `/tx/${txId}`)).body.state === 'confirmed',
      30_000,
      'relay to see it confirmed',
    );
    // A fresh page has seen no event of it: what it shows comes from GET /queue alone.
    const page = await browser.newPage({ viewport: { width: 1366, height: 768 } });
    await page.goto(url + '/');
    const row = page.locator(`[data-testid="queue-table"] tr[data-tx-id="${txId}"]`);
    await row.waitFor({ timeout: 15_000 });
    expect(await row.locator('.tag').textContent()).toBe('confirmed');
    const counts = page.locator('[data-testid="queue-counts"]');
    expect(await counts.locator('[data-state="confirmed"]').textContent()).toBe(' · 1 confirmed');
    expect(await counts.locator('[data-state="pending"]').count()).toBe(0);
    await page.screenshot({ path: join(ARTIFACTS, 'queue-states-1366x768.png') });
    await page.close();
  } finally {
    cluster.start();
  }
}, 60_000);
