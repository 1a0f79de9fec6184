// With AI_TOOLKIT_AUTH set, /api/* needs the token; the pages ask for it once and keep it.
import { expect, test } from '@playwright/test';

const TOKEN = process.env.AITK_E2E_AUTH_TOKEN as string;
test.use({ baseURL: `http://127.0.0.1:${process.env.AITK_E2E_AUTH_PORT}` });

test('the pages ask for the AI_TOOLKIT_AUTH token once and keep it', async ({ page }) => {
  expect((await page.request.get('/api/jobs')).status()).toBe(401);
  expect((await page.request.get('/api/jobs', { headers: { authorization: `Bearer ${TOKEN}` } })).status()).toBe(200);

  await page.goto('/jobs');
  const dialog = page.getByRole('dialog');
  await expect(dialog).toBeVisible();
  await dialog.getByLabel('Access token').fill('not-the-token');
  await dialog.getByRole('button', { name: 'Save' }).click();
  await expect(dialog).toContainText('The saved token was refused');

  await dialog.getByLabel('Access token').fill(TOKEN);
  await dialog.getByRole('button', { name: 'Save' }).click();
  await expect(page.getByText('No jobs yet')).toBeVisible();
  await expect(dialog).toHaveCount(0);

  // kept: another page, a reload, no question
  await page.goto('/generate');
  await expect(page.getByTestId('engine-strip')).toHaveAttribute('data-state', 'none');
  await page.reload();
  await expect(page.getByTestId('engine-strip')).toHaveAttribute('data-state', 'none');
  await expect(dialog).toHaveCount(0);
});
