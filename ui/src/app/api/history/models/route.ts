// GET /api/history/models: the models the history holds (for the gallery's model filter).
import { withAuth } from '@/server/auth';
import { json } from '@/server/http';
import { listHistoryModels } from '@/server/history';

export const dynamic = 'force-dynamic';

export const GET = withAuth(async () => json({ models: listHistoryModels() }));
