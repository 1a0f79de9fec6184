// POST /api/engine-settings/check {engine}: {ok: true}, or a 422 naming the key, as the job would
// fail at start (a new engine's block, before its job exists: the first-run folder offer).
import { withAuth } from '@/server/auth';
import { checkEngineBlock, engineBlockFromBody, refusal } from '@/server/engineSettings';
import { json, readJsonBody } from '@/server/http';

export const dynamic = 'force-dynamic';

export const POST = withAuth(async (req) => {
  const answer = await checkEngineBlock(engineBlockFromBody(await readJsonBody(req)));
  return answer.ok ? json({ ok: true }) : refusal(answer);
});
