// GET /api/engine-settings: the engine block's fields as the engine describes them (type, bounds,
// choices, default, doc), read from its Python once; the settings form is built from it.
import { withAuth } from '@/server/auth';
import { describeEngineSettings } from '@/server/engineSettings';
import { json } from '@/server/http';

export const dynamic = 'force-dynamic';

export const GET = withAuth(async () => json({ fields: await describeEngineSettings() }));
