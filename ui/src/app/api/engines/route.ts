// GET /api/engines: every inference engine job with its state, active model and queue (server/engines.ts).
import { withAuth } from '@/server/auth';
import { engineSummaries } from '@/server/engines';
import { json } from '@/server/http';

export const dynamic = 'force-dynamic';
export const runtime = 'nodejs';

export const GET = withAuth(async () => json({ engines: await engineSummaries() }));
