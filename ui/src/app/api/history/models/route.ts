// GET /api/history/models: the models the history holds and the sources its results came from
// (the gallery's model and source filters, the library's "used" line).
import { withAuth } from '@/server/auth';
import { json } from '@/server/http';
import { listHistoryModels, listHistorySources } from '@/server/history';

export const dynamic = 'force-dynamic';

export const GET = withAuth(async () => json({ models: listHistoryModels(), sources: listHistorySources() }));
