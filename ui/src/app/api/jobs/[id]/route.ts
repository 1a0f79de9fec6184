// GET /api/jobs/<id>: one job. DELETE: remove a job that is not running (its folder stays).
import { withAuth } from '@/server/auth';
import { json } from '@/server/http';
import { deleteJob, getJobOr404, publicJob } from '@/server/jobs';

export const dynamic = 'force-dynamic';

type Ctx = { params: Promise<{ id: string }> };

export const GET = withAuth<Ctx>(async (_req, ctx) => json({ job: publicJob(getJobOr404((await ctx.params).id)) }));

export const DELETE = withAuth<Ctx>(async (_req, ctx) => {
  deleteJob((await ctx.params).id);
  return json({ deleted: true });
});
