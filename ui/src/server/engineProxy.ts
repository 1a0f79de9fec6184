// Forward one request to the engine: the engine token injected, the caller's credentials
// removed, the response body streamed through untouched (never buffered), and the client's
// abort passed on. Request bodies (JSON, an uploaded image) are small and are read whole, so
// the engine always gets a Content-Length.
import { errorResponse } from './http';
import { forgetEngineFile, resolveEngine } from './engineEndpoint';
import { engineSummaries, pickEngine } from './engines';

// hop-by-hop headers, and credentials that must not cross the proxy in either direction
const DROP_REQUEST = new Set([
  'host', 'connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade',
  'proxy-authorization', 'proxy-connection', 'authorization', 'cookie', 'x-engine-token',
  'accept-encoding', 'content-length', 'expect',
  // the browser's origin headers: src/proxy.ts has checked them; the engine sees a local client
  'origin', 'referer', 'sec-fetch-site', 'sec-fetch-mode', 'sec-fetch-dest', 'sec-fetch-user',
]);
const DROP_RESPONSE = new Set([
  'connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade',
  'proxy-authenticate', 'set-cookie', 'x-engine-token', 'content-encoding',
]);

/** The request's `model` (a POST /generate body), for ?job=auto; null for any other body. */
function modelOf(body: ArrayBuffer | undefined): Record<string, unknown> | null {
  if (!body) return null;
  try {
    const v = JSON.parse(new TextDecoder().decode(body)) as { model?: unknown };
    return v && typeof v.model === 'object' && v.model !== null && !Array.isArray(v.model) ? (v.model as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export async function proxyToEngine(req: Request, pathSegments: string[]): Promise<Response> {
  const url = new URL(req.url);
  let jobParam = url.searchParams.get('job');
  url.searchParams.delete('job');
  let body: ArrayBuffer | undefined;
  if (req.method !== 'GET' && req.method !== 'HEAD' && req.body !== null) {
    try {
      body = await req.arrayBuffer();
    } catch {
      return new Response(null, { status: 499 }); // the client went away mid-upload
    }
  }
  // ?job=auto: the engine holding the request's model, else the least busy (server/engines.ts); the
  // answer's x-engine-job names it, for the request's cancel and re-attach
  if (jobParam === 'auto') {
    const picked = pickEngine(await engineSummaries(), modelOf(body));
    if (!picked) return errorResponse(503, 'engine_not_running', 'No inference engine is running. Start one on the Generate page.');
    jobParam = picked.job.id;
  }
  const target = resolveEngine(jobParam);
  if (!target.ok) return errorResponse(target.status, target.code, target.message);
  const { job, engine } = target;

  const headers = new Headers();
  req.headers.forEach((value, key) => {
    if (!DROP_REQUEST.has(key.toLowerCase())) headers.set(key, value);
  });
  headers.set('x-engine-token', engine.token);
  headers.set('accept-encoding', 'identity');

  const upstreamPath = pathSegments.map(encodeURIComponent).join('/');
  const search = url.searchParams.toString();
  const upstreamUrl = `http://${engine.host}:${engine.port}/${upstreamPath}${search ? `?${search}` : ''}`;
  let upstream: Response;
  try {
    upstream = await fetch(upstreamUrl, {
      method: req.method,
      headers,
      body,
      signal: req.signal,
      redirect: 'manual',
    });
  } catch (err) {
    if (req.signal.aborted) return new Response(null, { status: 499 });
    forgetEngineFile(job.name);
    const cause = (err as { cause?: { code?: string } }).cause?.code || (err as Error).message;
    return errorResponse(503, 'engine_unreachable', `The inference engine '${job.name}' did not answer at ${engine.host}:${engine.port} (${cause}).`);
  }

  const out = new Headers();
  upstream.headers.forEach((value, key) => {
    if (!DROP_RESPONSE.has(key.toLowerCase())) out.set(key, value);
  });
  if (!out.has('cache-control')) out.set('cache-control', 'no-store');
  out.set('x-accel-buffering', 'no');
  out.set('x-engine-job', job.id);
  out.set('x-engine-job-name', job.name);
  return new Response(upstream.body, { status: upstream.status, statusText: upstream.statusText, headers: out });
}
