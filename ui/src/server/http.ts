// Small helpers shared by the route handlers: JSON answers and errors a person can read.

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
  ) {
    super(message);
  }
}

export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers },
  });
}

/** `{error: code, message}`: every error body the UI's own routes return. */
export function errorResponse(status: number, code: string, message: string): Response {
  return json({ error: code, message }, status);
}

export function toErrorResponse(err: unknown): Response {
  if (err instanceof ApiError) return errorResponse(err.status, err.code, err.message);
  const message = err instanceof Error ? err.message : String(err);
  console.error('[api] unexpected error:', err);
  return errorResponse(500, 'internal', message);
}

export async function readJsonBody(req: Request): Promise<Record<string, unknown>> {
  let body: unknown;
  try {
    body = await req.json();
  } catch {
    throw new ApiError(400, 'bad_json', 'The request body is not valid JSON.');
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) {
    throw new ApiError(400, 'bad_json', 'The request body must be a JSON object.');
  }
  return body as Record<string, unknown>;
}
