// The result viewer against the real engine on tiny sd1: the finished image takes the latent
// preview's place at its own resolution (or larger, to fit), opens in a modal viewer with
// previous/next over the session's results and the gallery, compares two side by side, fits a
// phone's width, and sends a result to img2img, to inpaint, or its settings back to the form.
import { expect, test, type Page } from '@playwright/test';
import { fillNumber, galleryItems, shot, startEngineOnPage, stopEnginesAfterFailure, widerThanWindow } from './helpers';

test.afterEach(stopEnginesAfterFailure);

const JOB = 'inference_engine_viewer';
const W = 64;
const H = 48;

async function generate(page: Page, prompt: string, seed: number) {
  await page.getByTestId('prompt').fill(prompt);
  await fillNumber(page, 'seed', seed);
  await page.getByTestId('generate-button').click();
  await expect(page.getByTestId('progress-text')).toHaveAttribute('data-phase', 'done', { timeout: 180_000 });
  // the newest item of the history is this one
  const [item] = await galleryItems(page);
  expect(item.sample.prompt).toBe(prompt);
  return item.key;
}

/** The keys of the panes the viewer shows, left to right. */
const paneKeys = (page: Page) => page.getByTestId('viewer-pane').evaluateAll((els) => els.map((el) => (el as HTMLElement).dataset.key));

const focusInViewer = (page: Page) => page.evaluate(() => !!document.activeElement?.closest('[data-testid=viewer]'));

test('result viewer: the final image in the preview, a lightbox with previous/next and compare, send-to', async ({ page }) => {
  page.on('console', (msg) => {
    if (msg.type() === 'error') console.log(`[browser] ${msg.text()}`);
  });
  const { strip } = await startEngineOnPage(page, JOB);

  await page.getByTestId('arch-select').selectOption('sd1');
  await page.getByTestId('name-or-path').fill('tiny:sd1');
  await fillNumber(page, 'width', W);
  await fillNumber(page, 'height', H);
  await fillNumber(page, 'steps', 2);

  let first = '';
  let second = '';
  await test.step('a. the finished image replaces the latent preview, at its own resolution and larger than its thumbnail', async () => {
    first = await generate(page, 'viewer first', 1);
    const final = page.getByTestId('final-result');
    await expect(final).toHaveAttribute('data-key', first);
    await expect(page.getByTestId('preview-canvas')).toBeHidden();
    const img = page.getByTestId('final-media');
    await expect.poll(() => img.evaluate((el) => (el as HTMLImageElement).naturalWidth)).toBe(W);
    expect(await img.evaluate((el) => (el as HTMLImageElement).naturalHeight)).toBe(H);
    const thumb = page.getByTestId('gallery-item').filter({ hasText: 'viewer first' }).getByTestId('gallery-media');
    await expect.poll(() => thumb.evaluate((el) => (el as HTMLImageElement).naturalWidth)).toBe(W);
    const big = (await img.boundingBox())!;
    const small = (await thumb.boundingBox())!;
    expect(big.width).toBeGreaterThan(small.width);
    expect(big.width).toBeGreaterThanOrEqual(W);
    await shot(page, 'viewer-01-final');

    second = await generate(page, 'viewer second', 2);
    await expect(final).toHaveAttribute('data-key', second);
  });

  await test.step('b. the viewer: previous/next (buttons and arrow keys), the focus kept inside, Escape gives it back', async () => {
    await page.getByTestId('final-view').click();
    const viewer = page.getByTestId('viewer');
    await expect(viewer).toBeVisible();
    await expect(viewer).toHaveAttribute('aria-label', 'Result viewer');
    // this session's results first, newest first
    await expect.poll(() => paneKeys(page)).toEqual([second]);
    await expect(page.getByTestId('viewer-position')).toContainText(/^1 of \d+$/);
    await expect(page.getByTestId('viewer-prev')).toBeDisabled();
    expect(await focusInViewer(page)).toBe(true);
    const media = page.getByTestId('viewer-media');
    await expect.poll(() => media.evaluate((el) => (el as HTMLImageElement).naturalWidth)).toBe(W);

    await page.getByTestId('viewer-next').click();
    await expect.poll(() => paneKeys(page)).toEqual([first]);
    await expect(page.getByTestId('viewer-position')).toContainText(/^2 of /);
    await page.getByTestId('viewer-prev').click();
    await expect.poll(() => paneKeys(page)).toEqual([second]);
    await page.keyboard.press('ArrowRight');
    await expect.poll(() => paneKeys(page)).toEqual([first]);
    await page.keyboard.press('ArrowLeft');
    await expect.poll(() => paneKeys(page)).toEqual([second]);
    await page.keyboard.press('ArrowLeft'); // the first: stays
    await expect.poll(() => paneKeys(page)).toEqual([second]);

    // Tab and Shift+Tab go round the viewer's buttons
    for (let i = 0; i < 12; i++) {
      await page.keyboard.press('Tab');
      expect(await focusInViewer(page), `focus after Tab ${i + 1}`).toBe(true);
    }
    for (let i = 0; i < 12; i++) {
      await page.keyboard.press('Shift+Tab');
      expect(await focusInViewer(page), `focus after Shift+Tab ${i + 1}`).toBe(true);
    }
    await shot(page, 'viewer-02-lightbox');

    await page.keyboard.press('Escape');
    await expect(viewer).toHaveCount(0);
    await expect(page.getByTestId('final-view')).toBeFocused();
  });

  await test.step('c. from the gallery: compare two side by side; on a phone width nothing is wider than the window', async () => {
    const card = page.getByTestId('gallery-item').filter({ hasText: 'viewer first' });
    await card.getByTestId('gallery-view').click();
    await expect.poll(() => paneKeys(page)).toEqual([first]);
    await page.getByTestId('viewer-compare').click();
    await expect(page.getByTestId('viewer-compare')).toHaveAttribute('aria-pressed', 'true');
    await page.getByTestId('viewer-prev').click();
    await expect(page.getByTestId('viewer')).toHaveAttribute('data-comparing', 'true');
    await expect.poll(() => paneKeys(page)).toEqual([first, second]);
    const media = page.getByTestId('viewer-media');
    await expect(media).toHaveCount(2);
    for (const i of [0, 1]) await expect.poll(() => media.nth(i).evaluate((el) => (el as HTMLImageElement).naturalWidth)).toBe(W);
    const a = (await media.nth(0).boundingBox())!;
    const b = (await media.nth(1).boundingBox())!;
    expect(a.y).toBe(b.y); // side by side
    expect(a.x + a.width).toBeLessThanOrEqual(b.x);
    await shot(page, 'viewer-03-compare');

    await page.setViewportSize({ width: 400, height: 800 });
    expect(await widerThanWindow(page)).toEqual([]);
    for (const box of [await page.getByTestId('viewer').boundingBox(), await media.nth(1).boundingBox()]) expect(box!.x + box!.width).toBeLessThanOrEqual(400);
    await shot(page, 'viewer-04-phone');
    await page.setViewportSize({ width: 1400, height: 1000 });

    await page.getByTestId('viewer-compare').click();
    await expect.poll(() => paneKeys(page)).toEqual([second]);
    await page.getByTestId('viewer-close').click();
    await expect(page.getByTestId('viewer')).toHaveCount(0);
    await expect(card.getByTestId('gallery-view')).toBeFocused();
  });

  await test.step('d. send to img2img fills the init image slot; to inpaint sets the task; reuse settings fills the form', async () => {
    await expect(page.getByTestId('init-drop')).not.toHaveAttribute('data-asset', /./);
    await page.getByTestId('final-open-viewer').click();
    await page.getByTestId('viewer-img2img').click();
    await expect(page.getByTestId('viewer')).toHaveCount(0);
    await expect(page.getByTestId('init-drop')).toHaveAttribute('data-asset', /^[0-9a-f]{8}_ui-[a-z0-9-]+\.png$/);
    await expect(page.getByTestId('task-select')).toHaveAttribute('data-task', 'img2img');
    await expect(page.getByTestId('mask-canvas')).toHaveAttribute('width', String(W));
    await expect(page.getByTestId('mask-canvas')).toHaveAttribute('height', String(H));

    await page.getByTestId('final-open-viewer').click();
    await page.getByTestId('viewer-inpaint').click();
    await expect(page.getByTestId('viewer')).toHaveCount(0);
    await expect(page.getByTestId('task-select')).toHaveValue('inpaint');

    await page.getByTestId('gallery-item').filter({ hasText: 'viewer first' }).getByTestId('gallery-view').click();
    await page.getByTestId('viewer-reuse').click();
    await expect(page.getByTestId('viewer')).toHaveCount(0);
    await expect(page.getByTestId('prompt')).toHaveValue('viewer first');
    await expect(page.getByTestId('seed')).toHaveValue('1');
    await shot(page, 'viewer-05-sent');
  });

  await page.getByTestId('engine-stop').click();
  await expect(strip).toHaveAttribute('data-state', 'stopped', { timeout: 60_000 });
});
