// Helpers the Generate-page specs share: screenshots, number fields, and the history as the
// server holds it (what the gallery shows, newest first).
import fs from 'node:fs';
import path from 'node:path';
import { expect, type APIRequestContext, type Page, type TestInfo } from '@playwright/test';
import { SCREENSHOTS } from './env';

export const ENGINE_START_MS = 90_000;

export async function shot(page: Page, name: string) {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

export async function fillNumber(page: Page, testId: string, value: number) {
  const input = page.getByTestId(testId);
  await input.fill(String(value));
  await input.blur();
}

export interface HistoryItem {
  key: string;
  requestId: string;
  jobName: string;
  result: { relpath: string; seed: number; index?: number };
  model: Record<string, unknown>;
  sample: Record<string, unknown>;
  timings?: { total_s: number | null; run_s: number | null; load_s: number | null };
  source?: string;
  client?: string | null;
}

/** The history, newest first, once the page has written every result it got (GET /api/history). */
export async function galleryItems(page: Page, query = ''): Promise<HistoryItem[]> {
  await expect(page.getByTestId('gallery')).toHaveAttribute('data-saving', '0');
  const res = await page.request.get(`/api/history?limit=200${query}`);
  expect(res.ok()).toBe(true);
  return (await res.json()).items;
}

/** A CPU engine job of its own (`engine`: its engine settings), opened on /generate and started from the page. */
export async function startEngineOnPage(page: Page, name: string, engine: Record<string, unknown> = {}) {
  await stopRunningEngines(page.request); // one cpu device: an engine an earlier spec left up would keep this one queued
  const created = await page.request.post('/api/jobs', {
    data: { name, gpu_ids: 'cpu', job_type: 'inference', job_config: { job: 'extension', config: { process: [{ type: 'InferenceEngine', engine }] } } },
  });
  expect(created.status()).toBe(201);
  const job = (await created.json()).job as { id: string; name: string };
  await page.goto(`/generate?job=${job.id}`);
  const strip = page.getByTestId('engine-strip');
  await page.getByTestId('engine-start').click();
  await expect(strip).toHaveAttribute('data-state', 'ready', { timeout: ENGINE_START_MS });
  return { job, strip };
}

/** Elements reaching past the window's right edge (and the document, when it scrolls sideways). */
export async function widerThanWindow(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const w = document.documentElement.clientWidth;
    const out: string[] = [];
    if (document.documentElement.scrollWidth > w) out.push(`document ${document.documentElement.scrollWidth} > ${w}`);
    for (const el of Array.from(document.querySelectorAll('body *'))) {
      const r = el.getBoundingClientRect();
      if (r.width > 0 && r.right > w + 1 && getComputedStyle(el).position !== 'fixed') out.push(`${el.tagName.toLowerCase()}.${el.className} right=${Math.round(r.right)} > ${w}`);
    }
    return out.slice(0, 10);
  });
}

/** After a failed test: stop every engine job still running, and wait until they are down, so the
 * next test starts from a stopped engine instead of waiting on a Start button that is not there. */
export async function stopEnginesAfterFailure({ request }: { request: APIRequestContext }, testInfo: TestInfo) {
  if (testInfo.status === testInfo.expectedStatus) return;
  await stopRunningEngines(request);
}

/** Stop every engine job still running (or queued), and wait until they are down. */
export async function stopRunningEngines(request: APIRequestContext) {
  const running = async () =>
    ((await (await request.get('/api/jobs?job_type=inference')).json()).jobs as { id: string; status: string }[]).filter((j) =>
      ['running', 'queued', 'stopping'].includes(j.status),
    );
  for (const job of await running()) await request.post(`/api/jobs/${job.id}/stop`);
  await expect.poll(async () => (await running()).length, { timeout: 90_000 }).toBe(0);
}

/** The end of a spec that made engine jobs and results: stop the jobs, delete them and every history
 * item, so the specs after it start from a device with no engine job and an empty history. */
export async function removeJobsAndHistory(page: Page, jobIds: string[]) {
  for (const id of jobIds) await page.request.post(`/api/jobs/${id}/stop`);
  const status = async (id: string) => (await (await page.request.get(`/api/jobs/${id}`)).json()).job.status as string;
  for (const id of jobIds) await expect.poll(() => status(id), { timeout: 90_000 }).not.toMatch(/^(running|queued|stopping)$/);
  for (const it of await galleryItems(page)) expect((await page.request.delete(`/api/history/${encodeURIComponent(it.key)}`)).ok()).toBe(true);
  for (const id of jobIds) expect((await page.request.delete(`/api/jobs/${id}`)).ok()).toBe(true);
}

/** Drop a file on an element as a person would: dragenter, dragover, drop, with the file in a DataTransfer. */
export async function dropFile(page: Page, selector: string, bytes: Buffer, name: string) {
  const dt = await page.evaluateHandle(
    ({ data, fileName }) => {
      const transfer = new DataTransfer();
      transfer.items.add(new File([new Uint8Array(data)], fileName, { type: 'image/png' }));
      return transfer;
    },
    { data: Array.from(bytes), fileName: name },
  );
  const target = page.locator(selector).first();
  await target.dispatchEvent('dragenter', { dataTransfer: dt });
  await target.dispatchEvent('dragover', { dataTransfer: dt });
  await target.dispatchEvent('drop', { dataTransfer: dt });
}

/** Move a range input as a person would (fill() refuses ranges): the value set, then an input event. */
export async function setRange(page: Page, testId: string, value: number) {
  await page.getByTestId(testId).evaluate((el, v) => {
    const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value')?.set as (this: HTMLInputElement, v: string) => void;
    setter.call(el as HTMLInputElement, String(v));
    el.dispatchEvent(new Event('input', { bubbles: true }));
  }, value);
}
