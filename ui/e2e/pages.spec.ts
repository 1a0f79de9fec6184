// Every page at 1280×720 and at phone size: nothing wider than the window, every control has a name a
// screen reader can say (a <label>, aria-label/-labelledby, a title, or a button's text), and a
// screenshot of each under test-results/screenshots/. Then the keyboard alone: Ctrl+Enter in the
// prompt generates, Tab reaches Cancel and Enter cancels.
import { expect, test, type Page } from '@playwright/test';
import { shot, widerThanWindow, stopEnginesAfterFailure } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const ENGINE_JOB = 'inference_engine_cpu';
const VIEWPORTS = [
  ['1280x720', { width: 1280, height: 720 }],
  ['phone', { width: 390, height: 844 }],
] as const;


/** Visible controls with no accessible name, as short HTML snippets. */
async function unlabelled(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    const text = (el: Element | null) => (el?.textContent ?? '').replace(/\s+/g, ' ').trim();
    for (const el of Array.from(document.querySelectorAll('input, select, textarea, button, a[href], [role=button]'))) {
      const h = el as HTMLElement;
      if (h instanceof HTMLInputElement && h.type === 'hidden') continue;
      const r = h.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue; // not shown (a file input behind its drop zone)
      const byId = (h.getAttribute('aria-labelledby') ?? '')
        .split(/\s+/)
        .filter(Boolean)
        .map((id) => text(document.getElementById(id)))
        .join(' ');
      const labels = 'labels' in h ? Array.from((h as HTMLInputElement).labels ?? []).map(text).join(' ') : '';
      const own = h.tagName === 'BUTTON' || h.tagName === 'A' || h.getAttribute('role') === 'button' ? text(h) : '';
      const name = [h.getAttribute('aria-label'), byId, labels, h.getAttribute('title'), own].filter((s) => s && s.trim()).join(' ');
      if (!name) out.push(h.outerHTML.slice(0, 160));
    }
    return out;
  });
}

async function engineReady(page: Page): Promise<string> {
  await page.goto('/generate');
  const strip = page.getByTestId('engine-strip');
  // settled: up, or down with a Start button (not the moments a running job's health is first read)
  await expect(strip).toHaveAttribute('data-state', /^(ready|stopped|none|error)$/, { timeout: 90_000 });
  if ((await strip.getAttribute('data-state')) !== 'ready') await page.getByTestId('engine-start').click();
  await expect(strip).toHaveAttribute('data-state', 'ready', { timeout: 90_000 });
  const jobs = (await (await page.request.get('/api/jobs?job_type=inference')).json()).jobs as { id: string; name: string }[];
  const job = jobs.find((j) => j.name === ENGINE_JOB);
  expect(job).toBeTruthy();
  return job!.id;
}

test('every page at 1280×720 and phone size: fits, every control labelled, screenshots', async ({ page }) => {
  test.setTimeout(300_000);
  const jobId = await engineReady(page);
  // a second engine job (not started): the Generate page lists the engines and where requests go
  const second = await page.request.post('/api/jobs', {
    data: { name: 'inference_engine_pages_second', gpu_ids: 'cpu', job_type: 'inference', job_config: { job: 'extension', config: { process: [{ type: 'InferenceEngine' }] } } },
  });
  expect([201, 409]).toContain(second.status());
  await page.reload();
  await expect(page.getByTestId('engines-list')).toBeVisible();
  // the forms filled (a tiny model), so the Generate page shows every panel it has for an image arch
  await page.getByTestId('arch-select').selectOption('sd1');
  await page.getByTestId('name-or-path').fill('tiny:sd1');
  const pages: [string, string, string][] = [
    ['jobs', '/jobs', 'jobs-table'],
    ['job', `/jobs/${jobId}`, 'job-log'],
    ['settings', `/jobs/${jobId}/settings`, 'settings-form'],
    ['generate', `/generate?job=${jobId}`, 'prompt'],
    ['library', `/library?job=${jobId}`, 'library-filter'],
    ['grid', `/grid?job=${jobId}`, 'grid-run'],
  ];
  for (const [vpName, viewport] of VIEWPORTS) {
    await page.setViewportSize(viewport);
    for (const [name, url, ready] of pages) {
      await page.goto(url);
      await expect(page.getByTestId(ready).first()).toBeVisible({ timeout: 30_000 });
      expect(await unlabelled(page), `${url} at ${vpName}: controls with no label`).toEqual([]);
      expect(await widerThanWindow(page), `${url} at ${vpName}: wider than the window`).toEqual([]);
      await shot(page, `page-${name}-${vpName}`);
    }
  }
});

test('the keyboard alone: Ctrl+Enter generates, Tab reaches Cancel, Enter cancels', async ({ page }) => {
  test.setTimeout(300_000);
  const jobId = await engineReady(page);
  await page.goto(`/generate?job=${jobId}`);
  await page.getByTestId('arch-select').selectOption('zimage');
  await page.getByTestId('name-or-path').fill('tiny:zimage');
  for (const [id, v] of [['width', '64'], ['height', '64'], ['steps', '1000']]) await page.getByTestId(id).fill(v);
  const prompt = page.getByTestId('prompt');
  await prompt.fill('a fox, by keyboard');
  await prompt.press('Control+Enter');
  await expect(page.getByTestId('progress-text')).toContainText(/Step \d+\/1000/, { timeout: 60_000 });
  // Tab from the prompt until Cancel has the focus (a bounded number of stops)
  const cancel = page.getByTestId('cancel-button');
  let reached = false;
  for (let i = 0; i < 80 && !reached; i++) {
    await page.keyboard.press('Tab');
    reached = await cancel.evaluate((el) => el === document.activeElement).catch(() => false);
  }
  expect(reached, 'Tab reaches the Cancel button').toBe(true);
  await page.keyboard.press('Enter');
  await expect(page.getByTestId('gen-message')).toContainText('Cancelled', { timeout: 60_000 });
});
