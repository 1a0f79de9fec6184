// Bearer auth for every /api/* route: when AI_TOOLKIT_AUTH is set, a request must carry
// `Authorization: Bearer <that value>`. Each route handler is wrapped with withAuth.
import { timingSafeEqual } from 'node:crypto';
import { errorResponse, toErrorResponse } from './http';

export function isAuthorized(req: Request): boolean {
  const secret = process.env.AI_TOOLKIT_AUTH;
  if (!secret) return true;
  const header = req.headers.get('authorization') || '';
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  if (!match) return false;
  const given = Buffer.from(match[1]);
  const want = Buffer.from(secret);
  return given.length === want.length && timingSafeEqual(given, want);
}

type Handler<C> = (req: Request, ctx: C) => Promise<Response> | Response;

/** Wrap a route handler: 401 without the right token, and any thrown error as a JSON answer. */
export function withAuth<C>(handler: Handler<C>): Handler<C> & { authWrapped: true } {
  const wrapped = async (req: Request, ctx: C) => {
    if (!isAuthorized(req)) {
      return errorResponse(401, 'unauthorized', 'This server needs the AI_TOOLKIT_AUTH token (Authorization: Bearer …).');
    }
    try {
      return await handler(req, ctx);
    } catch (err) {
      return toErrorResponse(err);
    }
  };
  return Object.assign(wrapped, { authWrapped: true as const });
}
