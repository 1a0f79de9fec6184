// POST /api/grids?job=<job id or name>: a grid PNG (raw body) saved under that job's outputs folder
// (outputs/grids/); answers {relpath, url, bytes, width, height}.
import { withAuth } from '@/server/auth';
import { MAX_GRID_BYTES, readBounded, saveGridPng } from '@/server/gridFiles';
import { ApiError, json } from '@/server/http';
import { getJobOr404 } from '@/server/jobs';

export const dynamic = 'force-dynamic';

export const POST = withAuth(async (req) => {
  const jobParam = new URL(req.url).searchParams.get('job');
  if (!jobParam) throw new ApiError(400, 'job_required', 'Say which job the grid belongs to: ?job=<job id>.');
  const job = getJobOr404(jobParam);
  const bytes = await readBounded(req, MAX_GRID_BYTES);
  return json(saveGridPng(job.name, bytes), 201);
});
