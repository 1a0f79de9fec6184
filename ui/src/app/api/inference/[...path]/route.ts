// /api/inference/<engine route>[?job=<id>]: the streaming proxy to the running inference engine.
import { withAuth } from '@/server/auth';
import { proxyToEngine } from '@/server/engineProxy';

export const dynamic = 'force-dynamic';
export const runtime = 'nodejs';

type Ctx = { params: Promise<{ path: string[] }> };

const forward = withAuth<Ctx>(async (req, ctx) => proxyToEngine(req, (await ctx.params).path));

export const GET = forward;
export const POST = forward;
export const DELETE = forward;
export const PUT = forward;
