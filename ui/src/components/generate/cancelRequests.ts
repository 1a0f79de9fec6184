// Ending this page's requests: Cancel on the one the preview shows, the engine job stopping under
// them, and the page closing (requests sent without "keep generating" are cancelled).
import { apiFetch, describeError } from '@/utils/api';
import { stepText } from './generationView';
import { explainEngineStop, sleep, type RequestBook } from './requestBook';

const cancelUrl = (requestId: string, jobId: string) => `/api/inference/cancel/${encodeURIComponent(requestId)}?job=${jobId}`;

/** Cancel the request the preview shows. */
export async function cancelShown(book: RequestBook) {
  const ctx = book.shown;
  if (!ctx || ctx.ended) return;
  ctx.userCancelled = true;
  book.update(ctx, (v) => ({ ...v, cancelling: true }));
  let problem: string | null = null;
  try {
    const res = await apiFetch(cancelUrl(ctx.requestId, ctx.jobId), { method: 'POST' });
    if (!res.ok) problem = (await describeError(res)).message;
  } catch (err) {
    problem = (err as Error).message;
  }
  if (problem !== null) {
    // the engine could not be told: drop our side of the stream at least
    ctx.abort.abort();
    book.update(ctx, (v) => ({ ...v, phase: 'cancelled', cancelling: false, finishedAt: Date.now(), message: `Stopped following the request ${stepText(v)}; the engine could not confirm the cancel: ${problem}` }));
    book.finish(ctx);
    return;
  }
  // the stream now ends with error(cancelled) + end(cancelled); do not wait forever for it
  await sleep(15000);
  if (book.shown === ctx && !ctx.ended) {
    ctx.abort.abort();
    book.update(ctx, (v) => ({ ...v, phase: 'cancelled', cancelling: false, finishedAt: Date.now(), message: `Cancel sent ${stepText(v)}, but the engine did not confirm it.` }));
    book.finish(ctx);
  }
}

/**
 * The engine job is stopping or stopped. A request that ended cancelled without Cancel pressed here (or
 * ends so later) was stopped with the engine: say that. The others of this page went with it.
 */
export function engineStopped(book: RequestBook) {
  for (const ctx of [...book.ctxs.values()]) {
    if (ctx === book.shown) continue;
    ctx.abort.abort();
    ctx.ended = true;
    book.ctxs.delete(ctx.requestId);
  }
  book.persist();
  const ctx = book.shown;
  if (!ctx || ctx.userCancelled || ctx.engineStopped) return;
  ctx.engineStopped = true;
  book.update(ctx, explainEngineStop);
}

/** The page closes: its requests sent without "keep generating" are cancelled (a queued one has no
 * stream whose end the engine would notice). */
export function cancelOnClose(book: RequestBook) {
  for (const ctx of book.ctxs.values()) {
    if (ctx.keepOnClose === false) {
      void apiFetch(cancelUrl(ctx.requestId, ctx.jobId), { method: 'POST', keepalive: true }).catch(() => undefined);
    }
  }
}
