// Who asked for a result: the results feed's `api` (the engine route family) and `client` (X-Client,
// a ComfyUI client_id) as one source word the history keeps, filters by and shows. Pure.

/** Source word -> what the gallery says. A word not here is shown as it is. */
export const SOURCE_LABELS: Record<string, string> = {
  ui: 'Generate page',
  grid: 'Grid',
  cli: 'CLI',
  native: 'Engine API',
  a1111: 'A1111 API',
  openai: 'OpenAI API',
  comfyui: 'ComfyUI API',
  sdcpp: 'sd.cpp API',
};

const WORD = /^[A-Za-z0-9_.-]{1,32}$/;

/**
 * The source of a results-feed entry: the compat API that took it (a1111, openai, comfyui, sdcpp), else
 * the native caller's X-Client (ui, cli, grid), else 'native'.
 */
export function sourceOf(api: unknown, client: unknown): string {
  const a = typeof api === 'string' && WORD.test(api) ? api : 'native';
  if (a !== 'native') return a;
  return typeof client === 'string' && WORD.test(client) ? client : 'native';
}

/** The client name worth showing beside the source: a compat client's own id (the native callers' is the source). */
export function clientOf(api: unknown, client: unknown): string | null {
  if (typeof client !== 'string' || client === '' || client.length > 256) return null;
  return sourceOf(api, client) === client ? null : client;
}

export function sourceLabel(source: string | undefined | null): string {
  if (!source) return 'unknown';
  return SOURCE_LABELS[source] ?? source;
}
