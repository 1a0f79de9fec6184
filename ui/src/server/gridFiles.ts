// Grid PNGs (the /grid page's labelled comparison image) saved under a job's outputs folder:
// <job folder>/outputs/grids/grid-<time>-<rand>.png, written to a temporary name and renamed, so
// a reader never sees half a file.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ApiError } from './http';
import { jobFolder } from './paths';
import { pngSize } from './pngInfo';
import { MAX_UPLOAD_BYTES } from './uploadLimits';

/** A grid of 64 cells at 1024² compresses well under this; a larger body is refused before it is read whole. */
export const MAX_GRID_BYTES = MAX_UPLOAD_BYTES;
/** As a browser canvas: no side past 16384 px. */
export const MAX_GRID_SIDE = 16384;

/** The body's bytes, refused (413) once past `limit`, before the rest is read. */
export async function readBounded(req: Request, limit: number): Promise<Uint8Array> {
  const declared = Number(req.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
  if (!req.body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = req.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(limit);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

const tooLarge = (limit: number) => new ApiError(413, 'too_large', `A grid PNG may be at most ${limit / (1024 * 1024)} MiB.`);

export interface SavedGrid {
  /** relative to the job's outputs folder */
  relpath: string;
  /** where the UI serves it */
  url: string;
  bytes: number;
  width: number;
  height: number;
}

export function saveGridPng(jobName: string, bytes: Uint8Array): SavedGrid {
  const size = pngSize(bytes);
  if (!size) throw new ApiError(400, 'not_png', 'The body must be a PNG image (it does not start with the PNG signature and IHDR).');
  if (size.width > MAX_GRID_SIDE || size.height > MAX_GRID_SIDE) {
    throw new ApiError(400, 'too_large_image', `A grid PNG may be at most ${MAX_GRID_SIDE} px a side; this one is ${size.width}×${size.height}.`);
  }
  const dir = path.join(jobFolder(jobName), 'outputs', 'grids');
  fs.mkdirSync(dir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').replace('T', '-');
  const name = `grid-${stamp}-${randomBytes(3).toString('hex')}.png`;
  const file = path.join(dir, name);
  const tmp = path.join(dir, `.${name}.tmp`);
  try {
    fs.writeFileSync(tmp, bytes);
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
  const relpath = `grids/${name}`;
  return { relpath, url: `/api/files/${encodeURIComponent(jobName)}/outputs/${relpath}`, bytes: bytes.byteLength, ...size };
}
