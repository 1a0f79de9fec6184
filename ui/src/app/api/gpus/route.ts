// GET /api/gpus: the devices a job can run on: "cpu" plus what nvidia-smi lists.
import { withAuth } from '@/server/auth';
import { json } from '@/server/http';
import { listGpus } from '@/server/gpus';

export const dynamic = 'force-dynamic';

export const GET = withAuth(async () => json({ devices: [{ id: 'cpu', name: 'CPU' }, ...(await listGpus())] }));
