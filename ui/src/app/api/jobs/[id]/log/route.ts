// GET /api/jobs/<id>/log[?lines=N]: the last lines of <job folder>/log.txt.
import fs from 'node:fs';
import { withAuth } from '@/server/auth';
import { engineJsonPath } from '@/server/engineEndpoint';
import { json } from '@/server/http';
import { getJobOr404 } from '@/server/jobs';
import { jobLogPath, tailFile } from '@/server/logTail';

export const dynamic = 'force-dynamic';

type Ctx = { params: Promise<{ id: string }> };

/** Should an engine ever print its token, it still does not reach the browser. */
function redactEngineToken(text: string, jobName: string): string {
  try {
    const token = JSON.parse(fs.readFileSync(engineJsonPath(jobName), 'utf8')).token;
    if (typeof token === 'string' && token.length >= 8) return text.split(token).join('<engine token>');
  } catch {
    // no engine.json: nothing to redact
  }
  return text;
}

export const GET = withAuth<Ctx>(async (req, ctx) => {
  const job = getJobOr404((await ctx.params).id);
  const lines = Math.min(Math.max(Number(new URL(req.url).searchParams.get('lines')) || 400, 1), 5000);
  return json({ log: redactEngineToken(tailFile(jobLogPath(job.name), lines, 1024 * 1024), job.name) });
});
