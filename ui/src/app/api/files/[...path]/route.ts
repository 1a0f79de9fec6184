// /api/files/<job name>/<path>: files under the training folder (the generation results live in
// <job folder>/outputs). GET serves one; DELETE removes one under a job's outputs folder.
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { withAuth } from '@/server/auth';
import { ApiError, json } from '@/server/http';
import { resolveInside, trainingFolder } from '@/server/paths';
import { contentTypeFor } from '@/server/contentTypes';

export const dynamic = 'force-dynamic';

type Ctx = { params: Promise<{ path: string[] }> };

async function existingFile(ctx: Ctx): Promise<{ full: string; segments: string[]; size: number }> {
  const segments = (await ctx.params).path;
  const full = resolveInside(trainingFolder(), segments.join('/'));
  if (!full) throw new ApiError(400, 'bad_path', 'That path is outside the training folder.');
  // engine.json holds the engine's token, which never leaves the server
  if (path.basename(full).includes('engine.json')) throw new ApiError(403, 'forbidden', 'engine.json is private to the server.');
  let stat: fs.Stats;
  try {
    stat = fs.statSync(full);
  } catch {
    throw new ApiError(404, 'file_not_found', `No file ${segments.join('/')}.`);
  }
  if (!stat.isFile()) throw new ApiError(404, 'file_not_found', `${segments.join('/')} is not a file.`);
  return { full, segments, size: stat.size };
}

export const GET = withAuth<Ctx>(async (req, ctx) => {
  const { full, size } = await existingFile(ctx);
  const headers: Record<string, string> = {
    'content-type': contentTypeFor(full),
    'accept-ranges': 'bytes',
    'cache-control': 'no-store',
  };
  // byte ranges, so a <video> can seek
  const range = /^bytes=(\d*)-(\d*)$/.exec(req.headers.get('range') || '');
  if (range && (range[1] || range[2])) {
    const start = range[1] ? Number(range[1]) : Math.max(size - Number(range[2]), 0);
    const end = range[1] && range[2] ? Math.min(Number(range[2]), size - 1) : size - 1;
    if (start > end || start >= size) {
      return new Response(null, { status: 416, headers: { 'content-range': `bytes */${size}` } });
    }
    const body = Readable.toWeb(fs.createReadStream(full, { start, end })) as ReadableStream;
    return new Response(body, {
      status: 206,
      headers: { ...headers, 'content-range': `bytes ${start}-${end}/${size}`, 'content-length': String(end - start + 1) },
    });
  }
  const body = Readable.toWeb(fs.createReadStream(full)) as ReadableStream;
  return new Response(body, { headers: { ...headers, 'content-length': String(size) } });
});

export const DELETE = withAuth<Ctx>(async (_req, ctx) => {
  const { full, segments } = await existingFile(ctx);
  if (segments.length < 3 || segments[1] !== 'outputs') {
    throw new ApiError(403, 'not_an_output', 'Only files in a job\'s outputs folder can be deleted.');
  }
  fs.unlinkSync(full);
  return json({ deleted: path.posix.join(...segments) });
});
