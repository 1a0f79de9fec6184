// POST /api/jobs/<id>/start: queue the job; the worker starts it when its GPU set is free.
import { withAuth } from '@/server/auth';
import { json } from '@/server/http';
import { publicJob, startJob } from '@/server/jobs';

export const dynamic = 'force-dynamic';

type Ctx = { params: Promise<{ id: string }> };

export const POST = withAuth<Ctx>(async (_req, ctx) => json({ job: publicJob(startJob((await ctx.params).id)) }));
