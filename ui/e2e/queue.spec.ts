// The engine's queue on /generate (issue 13 item 2): while one request runs, Generate queues
// more; the queue panel lists them (place, model, size/steps, estimated start) with Cancel and
// moves; the preview follows the page's running request, and every queued request's result lands
// in the gallery. Against the real engine on the tiny zimage model.
import fs from 'node:fs';
import path from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { SCREENSHOTS } from './env';
import { stopEnginesAfterFailure } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const ENGINE_START_MS = 90_000;
// the first request must still be sampling while the others are queued and moved: the test
// cancels it when it is done with the queue, so no step count is a guess about the machine
const LONG = 1000;

interface EngineReq {
  request_id: string;
  status: string;
  prompt: string;
  started_at: number | null;
  pinned?: boolean;
}

async function shot(page: Page, name: string) {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

async function fillNumber(page: Page, testId: string, value: number) {
  const input = page.getByTestId(testId);
  await input.fill(String(value));
  await input.blur();
}

async function engineQueue(page: Page): Promise<{ running: EngineReq | null; queued: EngineReq[]; finished: EngineReq[] }> {
  const res = await page.request.get('/api/inference/queue');
  expect(res.ok()).toBe(true);
  return res.json();
}

/** One request with these settings, sent from the form (Generate, or Queue while one runs). */
async function send(page: Page, prompt: string, steps: number) {
  await page.getByTestId('prompt').fill(prompt);
  await fillNumber(page, 'steps', steps);
  await page.getByTestId('generate-button').click();
}

test('queue three requests while one runs, cancel the middle one, move one up: the rest land in the gallery in the new order', async ({ page }) => {
  page.on('console', (msg) => {
    if (msg.type() === 'error') console.log(`[browser] ${msg.text()}`);
  });
  await page.goto('/generate');
  const strip = page.getByTestId('engine-strip');
  // settled: up, or down with a Start button (not the moment a running job's health is first read)
  await expect(strip).toHaveAttribute('data-state', /^(ready|stopped|none|error)$/, { timeout: ENGINE_START_MS });
  if ((await strip.getAttribute('data-state')) !== 'ready') await page.getByTestId('engine-start').click();
  await expect(strip).toHaveAttribute('data-state', 'ready', { timeout: ENGINE_START_MS });
  const panel = page.getByTestId('queue-panel');
  await expect(panel).toContainText('Nothing is running or waiting');

  await page.getByTestId('arch-select').selectOption('zimage');
  await page.getByTestId('name-or-path').fill('tiny:zimage');
  await fillNumber(page, 'width', 64);
  await fillNumber(page, 'height', 64);
  const button = page.getByTestId('generate-button');
  const progress = page.getByTestId('progress-text');

  await test.step('a long request runs; Generate turns into Queue instead of being disabled', async () => {
    await send(page, 'queue long', LONG);
    await expect(progress).toContainText(/Step ([2-9]|\d\d+)\/1000/, { timeout: 120_000 });
    await expect(button).toBeEnabled();
    await expect(button).toHaveText('Queue');
    const running = panel.locator('[data-testid=queue-row][data-state=running]');
    await expect(running).toHaveCount(1);
    await expect(running).toContainText('queue long');
    await expect(running).toContainText(/step \d+\/1000/);
  });

  // each its own step count: no two can share a pipeline call (dynamic batching), so they run in queue order
  const queued = panel.locator('[data-testid=queue-row][data-state=queued]');
  await test.step('three more queued at once: three rows with place, model, size, steps and an estimated start', async () => {
    await send(page, 'queue A', 3);
    await send(page, 'queue B', 4);
    await send(page, 'queue C', 5);
    await expect(queued).toHaveCount(3);
    for (const [i, name, steps] of [[0, 'A', 3], [1, 'B', 4], [2, 'C', 5]] as const) {
      const row = queued.nth(i);
      await expect(row).toContainText(`queue ${name}`);
      await expect(row).toContainText(`#${i + 1}`);
      await expect(row).toContainText(`tiny:zimage · 64×64 · ${steps} steps`);
      await expect(row).toContainText('yours');
      // the engine has timed steps of the running request by now
      await expect(row.getByTestId('queue-start')).toHaveText(/^starts ~\d+ (s|min)/);
    }
    // the preview still follows the running request
    await expect(progress).toContainText(/\/1000/);
    await shot(page, 'queue-three-waiting');
  });

  await test.step('cancel the middle one from its row', async () => {
    await page.getByRole('button', { name: 'Cancel “queue B” (tiny:zimage)' }).click();
    await expect(queued).toHaveCount(2);
    await expect(queued.nth(0)).toContainText('queue A');
    await expect(queued.nth(1)).toContainText('queue C');
    const q = await engineQueue(page);
    expect(q.finished.find((r) => r.prompt === 'queue B')?.status).toBe('cancelled');
  });

  await test.step('a fourth, moved above the third with the keyboard: the engine has the new order', async () => {
    await send(page, 'queue D', 6);
    await expect(queued).toHaveCount(3);
    await expect(queued.nth(2)).toContainText('queue D');
    const up = page.getByRole('button', { name: 'Move “queue D” (tiny:zimage) up' });
    await up.focus();
    await page.keyboard.press('Enter');
    await expect(queued.nth(1)).toContainText('queue D');
    await expect(queued.nth(2)).toContainText('queue C');
    await expect(queued.nth(1)).toContainText('placed');
    // the keyboard stays where it was: the next Enter would move it again
    await expect(up).toBeFocused();
    const q = await engineQueue(page);
    expect(q.queued.map((r) => r.prompt)).toEqual(['queue A', 'queue D', 'queue C']);
    expect(q.queued.map((r) => r.pinned)).toEqual([false, true, false]);
    // the first row cannot go up, the last cannot go down
    await expect(queued.nth(0).getByTestId('queue-up')).toBeDisabled();
    await expect(queued.nth(2).getByTestId('queue-down')).toBeDisabled();
    await shot(page, 'queue-moved');
  });

  await test.step('a phone-sized window: the rows wrap, nothing is wider than the window', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await expect(queued).toHaveCount(3);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await panel.scrollIntoViewIfNeeded();
    await shot(page, 'queue-phone');
    await page.setViewportSize({ width: 1400, height: 1000 });
  });

  await test.step('a reload: the page still knows which requests are its own and follows the running one', async () => {
    await page.reload();
    await expect(strip).toHaveAttribute('data-state', 'ready');
    await expect(queued).toHaveCount(3);
    for (let i = 0; i < 3; i++) await expect(queued.nth(i)).toContainText('yours');
    await expect(progress).toHaveAttribute('data-phase', 'running', { timeout: 30_000 });
    await expect(progress).toContainText(/\/1000/);
    await expect(button).toHaveText('Queue');
  });

  await test.step('cancel the running one (the preview Cancel): the preview follows the queue to its end', async () => {
    await page.getByTestId('cancel-button').click();
    // the gallery gets A, D and C; the preview ends on the last to run (C: 5 steps)
    // (the history keeps earlier specs' results: this test's are the ones with its prompts)
    const items = page.getByTestId('gallery-item').filter({ has: page.locator('.prompt', { hasText: /^queue / }) });
    await expect(items).toHaveCount(3, { timeout: 180_000 });
    await expect(progress).toHaveAttribute('data-phase', 'done', { timeout: 60_000 });
    await expect(progress).toContainText('Step 5/5');
    await expect(button).toHaveText('Generate');
    const prompts = await items.locator('.prompt').allInnerTexts();
    expect([...prompts].sort()).toEqual(['queue A', 'queue C', 'queue D']);
    await expect(panel.getByTestId('queue-row')).toHaveCount(0);

    const q = await engineQueue(page);
    const byPrompt = Object.fromEntries(q.finished.map((r) => [r.prompt, r]));
    expect(byPrompt['queue long'].status).toBe('cancelled');
    expect(byPrompt['queue B'].status).toBe('cancelled');
    const ran = ['queue A', 'queue D', 'queue C'].map((p) => byPrompt[p]);
    expect(ran.map((r) => r.status)).toEqual(['ok', 'ok', 'ok']);
    const starts = ran.map((r) => r.started_at as number);
    expect(starts, 'they started in the queue order the person set').toEqual([...starts].sort((a, b) => a - b));
    await shot(page, 'queue-done');
  });

  await page.getByTestId('engine-stop').click();
  await expect(strip).toHaveAttribute('data-state', 'stopped', { timeout: 60_000 });
});
