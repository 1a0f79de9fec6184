// POST /api/jobs/<id>/stop: stop=1 and status=stopping; the worker escalates if it lingers.
import { withAuth } from '@/server/auth';
import { json } from '@/server/http';
import { publicJob, stopJob } from '@/server/jobs';

export const dynamic = 'force-dynamic';

type Ctx = { params: Promise<{ id: string }> };

export const POST = withAuth<Ctx>(async (_req, ctx) => json({ job: publicJob(stopJob((await ctx.params).id)) }));
