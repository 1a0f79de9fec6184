// Entry point of the worker process (built to dist/worker/index.js, started by scripts/start.mjs).
import { closeAllDbs, getDb } from '../server/db';
import { dbPath, trainingFolder } from '../server/paths';
import { JobWorker } from './jobWorker';
import { ResultsFollower } from './resultsFollower';

function seconds(name: string, fallback: number): number {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v >= 0 ? v * 1000 : fallback * 1000;
}

const log = (msg: string) => console.log(`[worker] ${msg}`);
getDb(); // create or migrate the Job table before anything else
log(`db ${dbPath()}, training folder ${trainingFolder()}`);

const worker = new JobWorker({
  graceMs: seconds('AITK_STOP_GRACE_S', 30),
  killMs: seconds('AITK_STOP_KILL_S', 10),
  tickMs: seconds('AITK_WORKER_TICK_S', 1),
  log,
});
worker.start();
// the history kept by the server: every running engine's results, read about once a second
const follower = new ResultsFollower({ tickMs: seconds('AITK_HISTORY_POLL_S', 1), log });
follower.start();

for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    // job processes are detached and keep running; the next worker adopts them by pid
    worker.close();
    follower.close();
    closeAllDbs();
    process.exit(0);
  });
}
