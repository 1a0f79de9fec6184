// Sending a request (POST /generate through the proxy). With none of this page's running or waiting,
// the preview follows its POST stream. Otherwise it is queued: sent detached, its stream closed once
// the engine took it, and followed later through GET /stream (one open stream per page, whatever the
// queue).
import { apiFetch, describeError } from '@/utils/api';
import type { PendingRequest } from './pendingRequests';
import { REATTACH_TRIES, type Ctx, type RequestBook } from './requestBook';
import { readStream, reattach } from './requestStreams';

/** POST /generate; the engine's answer, or why there is none in words for this page. */
async function post(jobId: string, body: Record<string, unknown>, signal: AbortSignal): Promise<Response | { refused: string } | null> {
  let res: Response;
  try {
    res = await apiFetch(`/api/inference/generate?job=${jobId}`, {
      method: 'POST',
      // X-Client: the engine's results feed says this page asked (the history's source)
      headers: { 'content-type': 'application/json', 'x-client': 'ui' },
      body: JSON.stringify(body),
      signal,
    });
  } catch (err) {
    if (signal.aborted) return null;
    return { refused: `The UI server did not answer: ${(err as Error).message}` };
  }
  if (res.ok) return res;
  const { message, code } = await describeError(res);
  // the server's words name the Generate page; this is it
  return { refused: code === 'engine_not_running' ? 'The engine is not running: start the engine above, then Generate.' : message };
}

export async function sendRequest(book: RequestBook, job: { id: string; name: string }, body: { request_id: string } & Record<string, unknown>) {
  const stream = (body.stream ?? {}) as Record<string, unknown>;
  const rec: PendingRequest = { requestId: body.request_id, jobId: job.id, jobName: job.name, startedAt: Date.now(), keepOnClose: stream.detach !== false };
  const queueing = book.ctxs.size > 0;
  book.io.setNotice(null);
  const ctl = new AbortController();
  let ctx: Ctx | null = null;
  if (!queueing) {
    book.shown?.abort.abort();
    ctx = book.add(rec, 'submitting');
    ctx.abort = ctl;
    ctx.reading = true; // its reader is this POST
    book.show(ctx);
  }
  const res = await post(job.id, queueing ? { ...body, stream: { ...stream, detach: true } } : body, ctl.signal);
  if (res === null) return;
  if (!(res instanceof Response)) {
    if (!ctx) return book.io.setNotice(`Not queued. ${res.refused}`);
    book.update(ctx, (v) => ({ ...v, phase: 'error', finishedAt: Date.now(), message: res.refused }));
    return book.finish(ctx);
  }
  // sent with ?job=auto: the engine that took it is the one for its cancel, re-attach and files
  const took = res.headers.get('x-engine-job');
  if (took && took !== rec.jobId) {
    rec.jobId = took;
    rec.jobName = res.headers.get('x-engine-job-name') ?? rec.jobName;
    if (ctx) Object.assign(ctx, { jobId: rec.jobId, jobName: rec.jobName });
  }
  if (!ctx) {
    ctl.abort(); // detached: the engine keeps it; it is followed when its turn comes
    book.add(rec, 'submitting');
    book.persist();
    book.advance();
    return;
  }
  book.persist();
  ctx.cancelOnDrop = !rec.keepOnClose;
  const outcome = await readStream(book, ctx, res, ctl);
  if (outcome === 'lost') await reattach(book, ctx, REATTACH_TRIES);
}
