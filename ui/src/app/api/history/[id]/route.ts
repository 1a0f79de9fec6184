// DELETE /api/history/<id>: a history entry and its files (only inside its job's outputs folder).
import { withAuth } from '@/server/auth';
import { json } from '@/server/http';
import { deleteGeneration } from '@/server/history';

export const dynamic = 'force-dynamic';

type Ctx = { params: Promise<{ id: string }> };

export const DELETE = withAuth<Ctx>(async (_req, ctx) => json(deleteGeneration((await ctx.params).id)));
