// GET /api/history?q=&model=&source=&limit=&before=: the generation history, newest first (q searches
// the prompt, model is a key from /api/history/models, source a word from there, before the `next` of
// an earlier page).
// POST /api/history: add a result (a gallery item); the same key twice is one entry.
import { withAuth } from '@/server/auth';
import { ApiError, json, readJsonBody } from '@/server/http';
import { addGeneration, listGenerations, MAX_LIMIT } from '@/server/history';

export const dynamic = 'force-dynamic';

function limitParam(raw: string | null): number | undefined {
  if (raw === null || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > MAX_LIMIT) throw new ApiError(400, 'bad_field', `limit must be an integer from 1 to ${MAX_LIMIT}.`);
  return n;
}

export const GET = withAuth(async (req) => {
  const p = new URL(req.url).searchParams;
  const q = p.get('q') ?? '';
  if (q.length > 1000) throw new ApiError(400, 'bad_field', 'q must be at most 1000 characters.');
  const source = p.get('source') ?? '';
  if (source.length > 32) throw new ApiError(400, 'bad_field', 'source must be at most 32 characters.');
  return json(listGenerations({ q, model: p.get('model') ?? '', source, limit: limitParam(p.get('limit')), before: p.get('before') || undefined }));
});

export const POST = withAuth(async (req) => {
  const { item, created } = addGeneration(await readJsonBody(req));
  return json({ item, created }, created ? 201 : 200);
});
