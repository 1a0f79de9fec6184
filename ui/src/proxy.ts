// Next's request interception: every request (pages, /api, static files; no matcher) passes the
// request guard before anything else sees it. A refusal is answered here in the UI's error shape;
// otherwise the request goes on untouched.
import { errorResponse } from '@/server/http';
import { requestRefusal } from '@/server/requestGuard';

export function proxy(request: Request): Response | undefined {
  const refused = requestRefusal(request);
  return refused ? errorResponse(refused.status, refused.code, refused.message) : undefined;
}
