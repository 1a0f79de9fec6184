'use client';
// Input images go to the engine's assets folder (POST /assets through the proxy); a file's settings
// come back from POST /settings. The UI shows stored assets from the engine job's folder
// (<job folder>/assets/<id>, through /api/files, so they show with the engine stopped too).
import { apiFetch, describeError } from '@/utils/api';
import type { SettingsAnswer } from './requestBody';
import { assetUploadName } from './tasks';

/** Where the UI serves a stored input image from. */
export function assetUrl(jobName: string, assetId: string): string {
  return `/api/files/${encodeURIComponent(jobName)}/assets/${encodeURIComponent(assetId)}`;
}

/** Upload an image (a File, or bytes made here such as the mask) and get its asset id. */
export async function uploadAsset(jobId: string, body: Blob, fileName: string): Promise<string> {
  const name = assetUploadName(fileName);
  const res = await apiFetch(`/api/inference/assets?name=${encodeURIComponent(name)}&job=${encodeURIComponent(jobId)}`, {
    method: 'POST',
    headers: { 'content-type': body.type || 'application/octet-stream' },
    body,
  });
  if (!res.ok) throw new Error((await describeError(res)).message);
  return ((await res.json()) as { path: string }).path;
}

/** POST /settings: the request that made a generated file. */
export async function readFileSettings(jobId: string, file: Blob): Promise<SettingsAnswer> {
  const res = await apiFetch(`/api/inference/settings?job=${encodeURIComponent(jobId)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream' },
    body: file,
  });
  if (!res.ok) throw new Error((await describeError(res)).message);
  return (await res.json()) as SettingsAnswer;
}

/** An image dragged from this page (a gallery result): its URL, when it is one of ours. */
export function sameOriginImageUrl(dt: DataTransfer): string | null {
  const text = (dt.getData('text/uri-list') || dt.getData('text/plain') || '').split(/\r?\n/).find((l) => l && !l.startsWith('#'));
  if (!text) return null;
  try {
    const url = new URL(text, window.location.href);
    return url.origin === window.location.origin && url.pathname.startsWith('/api/files/') ? url.pathname + url.search : null;
  } catch {
    return null;
  }
}

/** The file a drop carries: a dropped file, or an image dragged from this page, fetched. */
export async function droppedFile(dt: DataTransfer): Promise<File | null> {
  const file = dt.files?.[0];
  if (file) return file;
  const url = sameOriginImageUrl(dt);
  if (!url) return null;
  const res = await apiFetch(url);
  if (!res.ok) throw new Error((await describeError(res)).message);
  const blob = await res.blob();
  const name = decodeURIComponent(url.split('?')[0].split('/').pop() || 'image.png');
  return new File([blob], name, { type: blob.type || 'image/png' });
}
