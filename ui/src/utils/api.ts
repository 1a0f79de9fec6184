'use client';
// Browser-side fetch for the UI's /api routes: adds the AI_TOOLKIT_AUTH token the person gave
// once (kept in localStorage), asks for it on a 401, and turns error bodies into readable text.

const TOKEN_KEY = 'aitk.auth';
export const AUTH_REQUIRED_EVENT = 'aitk:auth-required';

export function getAuthToken(): string | null {
  try {
    return window.localStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setAuthToken(token: string | null): void {
  if (token) window.localStorage.setItem(TOKEN_KEY, token);
  else window.localStorage.removeItem(TOKEN_KEY);
}

export async function apiFetch(url: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const token = getAuthToken();
  if (token) headers.set('authorization', `Bearer ${token}`);
  const res = await fetch(url, { ...init, headers, cache: 'no-store' });
  if (res.status === 401 && url.startsWith('/api/') && !url.startsWith('/api/inference/')) {
    window.dispatchEvent(new Event(AUTH_REQUIRED_EVENT));
  } else if (res.status === 401) {
    // the proxy's own 401 has {error: 'unauthorized'}; the engine's has {detail}
    const body = await res.clone().json().catch(() => null);
    if (body?.error === 'unauthorized') window.dispatchEvent(new Event(AUTH_REQUIRED_EVENT));
  }
  return res;
}

export class ApiRequestError extends Error {
  constructor(
    message: string,
    public status: number,
    public code?: string,
  ) {
    super(message);
  }
}

/** A person-readable message for a failed response from the UI or (through the proxy) the engine. */
export async function describeError(res: Response): Promise<{ message: string; code?: string }> {
  const text = await res.text().catch(() => '');
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON
  }
  const b = (body ?? {}) as { error?: string; message?: string; detail?: unknown };
  if (typeof b.message === 'string') return { message: b.message, code: b.error };
  if (typeof b.detail === 'string') {
    if (res.status === 503) return { message: `The engine is busy: ${b.detail}.`, code: 'engine_busy' };
    if (res.status === 409) return { message: `The engine is busy: ${b.detail}.`, code: 'engine_busy' };
    return { message: `The engine refused the request (HTTP ${res.status}): ${b.detail}`, code: 'engine_refused' };
  }
  if (Array.isArray(b.detail)) {
    const parts = b.detail.map((d: { loc?: unknown[]; msg?: string }) =>
      `${(d.loc ?? []).filter((x) => x !== 'body').join('.')}: ${d.msg ?? 'invalid'}`,
    );
    return { message: `The engine refused the request (HTTP ${res.status}): ${parts.join('; ')}`, code: 'engine_refused' };
  }
  const snippet = text.trim().slice(0, 200);
  return { message: `HTTP ${res.status} ${res.statusText}${snippet ? `: ${snippet}` : ''}` };
}

export async function apiJson<T>(url: string, init: RequestInit = {}): Promise<T> {
  let res: Response;
  try {
    res = await apiFetch(url, init);
  } catch (err) {
    throw new ApiRequestError(`The UI server did not answer (${(err as Error).message}).`, 0);
  }
  if (!res.ok) {
    const { message, code } = await describeError(res);
    throw new ApiRequestError(message, res.status, code);
  }
  return (await res.json()) as T;
}

export function postJson<T>(url: string, body?: unknown): Promise<T> {
  return apiJson<T>(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}
