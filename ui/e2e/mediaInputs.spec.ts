// Inputs that are not images, in the real page against the real engine (tiny models, CPU): the input
// panel offers what the arch's tasks take (GET /models), a dropped file is checked by its header where
// it is dropped, and the request the engine runs is the task those inputs make.
// - stable_audio3: an input audio (a wav written here) with the inpaint region -> audio_inpaint, an
//   audio result played in place;
// - wan_vace: an input video (an mp4 written by the test fixtures) -> v2v; a PNG dropped into the
//   video slot is refused at the drop.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect, test } from '@playwright/test';
import { dropFile, fillNumber, galleryItems, removeJobsAndHistory, startEngineOnPage, stopEnginesAfterFailure, stopRunningEngines } from './helpers';

const REPO = path.resolve(__dirname, '..', '..');
const PYTHON = process.env.AITK_PYTHON || path.join(REPO, '.venv', 'bin', 'python');

test.afterEach(stopEnginesAfterFailure);
test.setTimeout(300_000);

/** A mono 16-bit PCM wav of `seconds` (a tone), as a recorder writes one. */
function wav(seconds: number, rate = 22050): Buffer {
  const n = Math.round(seconds * rate);
  const data = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) data.writeInt16LE(Math.round(Math.sin((2 * Math.PI * 330 * i) / rate) * 12000), i * 2);
  const head = Buffer.alloc(44);
  head.write('RIFF', 0);
  head.writeUInt32LE(36 + data.length, 4);
  head.write('WAVEfmt ', 8);
  head.writeUInt32LE(16, 16);
  head.writeUInt16LE(1, 20); // PCM
  head.writeUInt16LE(1, 22); // mono
  head.writeUInt32LE(rate, 24);
  head.writeUInt32LE(rate * 2, 28);
  head.writeUInt16LE(2, 32);
  head.writeUInt16LE(16, 34);
  head.write('data', 36);
  head.writeUInt32LE(data.length, 40);
  return Buffer.concat([head, data]);
}

/** An mp4 (MPEG-4 Part 2, 80x56, 12 frames) from the engine's own test fixtures. */
function mp4(): Buffer {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'aitk-media-')), 'control.mp4');
  execFileSync(PYTHON, ['-c', `from testing.fixtures import input_video; input_video(${JSON.stringify(file)}, 80, 56, 12)`], { cwd: REPO, stdio: 'inherit' });
  return fs.readFileSync(file);
}

test('audio and video inputs: dropped, checked, and the task they make runs', async ({ page }) => {
  const jobs: string[] = [];
  await test.step('stable_audio3: an input audio and its region make audio_inpaint; the result plays in place', async () => {
    const audio = await startEngineOnPage(page, 'media_inputs_audio', { default_model: { arch: 'stable_audio3', name_or_path: 'tiny:stable_audio3' } });
    jobs.push(audio.job.id);
    await expect(page.getByTestId('arch-select')).toHaveValue('stable_audio3');
    await page.getByTestId('prompt').fill('rain on a tin roof');
    await fillNumber(page, 'steps', 2);
    await page.getByLabel('Duration (s)', { exact: true }).fill('1.5');
    await expect(page.getByTestId('init-audio-drop')).toBeVisible();
    await expect(page.getByTestId('init-video-drop')).toHaveCount(0); // no task of this arch takes a video
    await dropFile(page, '[data-testid=init-audio-drop]', wav(1.5), 'loop.wav');
    await expect(page.getByTestId('init-audio-drop')).toHaveAttribute('data-asset', /^[0-9a-f]{8}_loop\.wav$/);
    await page.getByTestId('mask-start').fill('0.25');
    await page.getByTestId('mask-end').fill('0.75');
    await page.getByTestId('generate-button').click();
    await expect(page.getByTestId('final-result')).toHaveAttribute('data-kind', 'audio', { timeout: 120_000 });
    const [item] = await galleryItems(page);
    expect(item.sample).toMatchObject({ task: 'audio_inpaint', mask_start: 0.25, mask_end: 0.75 });
    expect(String(item.sample.init_audio)).toMatch(/loop\.wav$/);
  });

  await test.step('wan_vace: a PNG in the video slot is refused at the drop; an mp4 makes v2v', async () => {
    await stopRunningEngines(page.request);
    const video = await startEngineOnPage(page, 'media_inputs_video', { default_model: { arch: 'wan_vace', name_or_path: 'tiny:wan_vace' } });
    jobs.push(video.job.id);
    await expect(page.getByTestId('arch-select')).toHaveValue('wan_vace');
    await page.getByTestId('prompt').fill('a red square moving right');
    await fillNumber(page, 'width', 64);
    await fillNumber(page, 'height', 64);
    await fillNumber(page, 'steps', 2);
    await page.getByLabel('Frames', { exact: true }).fill('9');
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    await dropFile(page, '[data-testid=init-video-drop]', png, 'not-a-video.mp4');
    await expect(page.getByTestId('init-video-drop-error')).toContainText(/MP4|WebM/);
    await expect(page.getByTestId('init-video-drop')).toHaveAttribute('data-asset', '');
    await dropFile(page, '[data-testid=init-video-drop]', mp4(), 'control.mp4');
    await expect(page.getByTestId('init-video-drop')).toHaveAttribute('data-asset', /^[0-9a-f]{8}_control\.mp4$/);
    await expect(page.getByTestId('mask-video-drop')).toBeVisible();
    await page.getByTestId('generate-button').click();
    await expect(page.getByTestId('final-result')).toHaveAttribute('data-kind', 'video', { timeout: 120_000 });
    const [item] = await galleryItems(page);
    expect(item.sample).toMatchObject({ task: 'v2v' });
    expect(String(item.sample.init_video)).toMatch(/control\.mp4$/);
  });
  await removeJobsAndHistory(page, jobs); // the specs after this one start from their own jobs and history
});
