// GET /api/jobs[?job_type=inference]: the job list. POST /api/jobs: create a job (not started).
import { withAuth } from '@/server/auth';
import { json, readJsonBody } from '@/server/http';
import { createJob, listJobs, publicJob } from '@/server/jobs';

export const dynamic = 'force-dynamic';

export const GET = withAuth(async (req) => {
  const jobType = new URL(req.url).searchParams.get('job_type') || undefined;
  return json({ jobs: listJobs({ job_type: jobType }).map(publicJob) });
});

export const POST = withAuth(async (req) => {
  const body = await readJsonBody(req);
  const job = createJob({ name: body.name, gpu_ids: body.gpu_ids, job_type: body.job_type, job_config: body.job_config });
  return json({ job: publicJob(job) }, 201);
});
