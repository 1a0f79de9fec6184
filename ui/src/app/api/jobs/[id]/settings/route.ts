// GET /api/jobs/<id>/settings: an engine job's engine: block. PUT {engine}: check it through the
// engine's Python (a 422 naming the key), then write it into the job's config; a running engine
// reads it when it next starts (the settings page restarts it through /stop and /start).
import { withAuth } from '@/server/auth';
import { checkEngineBlock, engineBlockFromBody, refusal } from '@/server/engineSettings';
import { json, readJsonBody } from '@/server/http';
import { engineBlockOf, withEngineBlock } from '@/server/jobConfig';
import { getJobOr404, publicJob, updateJob } from '@/server/jobs';

export const dynamic = 'force-dynamic';

type Ctx = { params: Promise<{ id: string }> };

export const GET = withAuth<Ctx>(async (_req, ctx) => {
  const job = getJobOr404((await ctx.params).id);
  return json({ job: publicJob(job), engine: engineBlockOf(job) });
});

export const PUT = withAuth<Ctx>(async (req, ctx) => {
  const job = getJobOr404((await ctx.params).id);
  engineBlockOf(job); // a job that is not an engine: its 400 before any check runs
  const block = engineBlockFromBody(await readJsonBody(req));
  const answer = await checkEngineBlock(block);
  if (!answer.ok) return refusal(answer);
  updateJob(job.id, { job_config: JSON.stringify(withEngineBlock(job, block)) });
  const saved = getJobOr404(job.id);
  return json({ job: publicJob(saved), engine: engineBlockOf(saved) });
});
