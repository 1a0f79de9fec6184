// What every request to the UI passes first (src/proxy.ts runs it on every path). The UI starts
// processes and shows prompts and outputs, so it obeys its own pages only (as ComfyUI's origin check):
// - Host: a DNS-rebinding page reaches the UI under the page's own name, so on a loopback bind only
//   loopback names pass; on another bind also IP literals (no name, nothing to rebind) and the bound
//   name; on any bind the names listed in AITK_UI_ALLOWED_HOSTS.
// - Origin (else Referer) and Sec-Fetch-Site: a request another page made is refused, any method.
// - Content-Type: a body is JSON unless the route takes a file (FILE_BODIES). A page may send
//   text/plain, a form or multipart to another site without asking; none of those is accepted.
// Pure (a Request and the env in, a refusal or null out); auth (auth.ts) comes after, not instead.
import { MAX_UPLOAD_BYTES } from './uploadLimits';

export interface Refusal {
  status: number;
  code: string;
  message: string;
}

type Env = Record<string, string | undefined>;

/** Routes whose body is a file, and the types each takes; every other body is application/json. */
const FILE_BODIES: Record<string, string[]> = {
  'POST /api/grids': ['image/png'],
  'POST /api/inference/assets': ['image/*', 'video/*', 'audio/*', 'application/octet-stream'],
  'POST /api/inference/settings': ['image/*', 'video/*', 'audio/*', 'application/octet-stream'],
};
const JSON_BODY = ['application/json'];
const BODILESS = new Set(['GET', 'HEAD', 'OPTIONS']);

// a Host header: a name, an IPv4 address or a bracketed IPv6 one, and an optional port; anything
// else (userinfo, spaces, an unbracketed IPv6) is not a Host a browser sends
const HOST_SYNTAX = /^(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::(\d{1,5}))?$/;

function parseHost(raw: string): { name: string; port: string } | null {
  const m = HOST_SYNTAX.exec(raw.trim().toLowerCase());
  return m ? { name: m[1], port: m[2] ?? '' } : null;
}

function isIPv4(name: string): boolean {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(name);
  return !!m && m.slice(1).every((o) => Number(o) <= 255);
}

const isIPv6 = (name: string) => name.startsWith('[') && name.includes(':');
const isLoopbackName = (name: string) => name === 'localhost' || name === '[::1]' || (isIPv4(name) && name.startsWith('127.'));

/** The bind rule of scripts/listenHost.mjs (tests/requestGuard.test.ts checks they agree). */
export function isLoopbackBind(host: string): boolean {
  const h = host.trim().toLowerCase();
  return ['127.0.0.1', 'localhost', '::1', '[::1]', 'ip6-localhost', '::ffff:127.0.0.1'].includes(h) || /^127(\.\d{1,3}){3}$/.test(h);
}

interface HostPolicy {
  loopbackBind: boolean;
  /** extra names, each `name` (any port) or `name:port` */
  names: Set<string>;
}

function hostPolicy(env: Env): HostPolicy {
  const bind = (env.AITK_UI_HOST || '').trim().toLowerCase() || '127.0.0.1';
  const names = new Set<string>();
  for (const entry of (env.AITK_UI_ALLOWED_HOSTS || '').split(/[\s,]+/)) {
    const h = entry && parseHost(entry);
    if (h) names.add(h.port ? `${h.name}:${h.port}` : h.name);
  }
  const loopbackBind = isLoopbackBind(bind);
  // a bound name (not a wildcard or an address, which pass as IP literals) is the UI's own name
  if (!loopbackBind && !bind.includes(':') && !isIPv4(bind)) names.add(bind);
  return { loopbackBind, names };
}

function hostAllowed(h: { name: string; port: string }, policy: HostPolicy): boolean {
  if (isLoopbackName(h.name)) return true;
  if (policy.names.has(h.name) || (h.port && policy.names.has(`${h.name}:${h.port}`))) return true;
  return !policy.loopbackBind && (isIPv4(h.name) || isIPv6(h.name));
}

function acceptedHosts(policy: HostPolicy): string {
  const base = policy.loopbackBind ? 'localhost, 127.0.0.1 and [::1] (it listens on loopback)' : 'loopback names and IP addresses';
  return policy.names.size ? `${base}; also ${[...policy.names].join(', ')}` : base;
}

/** `value` (an Origin or a Referer) is the UI's own origin: http or https, and the request's Host. */
function isOwnOrigin(value: string, host: string): boolean {
  let url: URL;
  try {
    url = new URL(value); // "null" (a sandboxed frame, a file, a redirect) does not parse: foreign
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
  const defaultPort = url.protocol === 'https:' ? ':443' : ':80';
  return url.host === (host.endsWith(defaultPort) ? host.slice(0, -defaultPort.length) : host);
}

const shown = (v: string) => (v.length > 200 ? `${v.slice(0, 200)}…` : v);

function typeAccepted(type: string, accepted: string[]): boolean {
  return accepted.some((a) => (a.endsWith('/*') ? type.startsWith(a.slice(0, -1)) : type === a));
}

/** Why the UI will not serve this request, or null when it may. */
export function requestRefusal(req: Request, env: Env = process.env): Refusal | null {
  const method = req.method.toUpperCase();
  const pathname = new URL(req.url).pathname;
  const rawHost = req.headers.get('host') || '';
  const host = parseHost(rawHost);
  const policy = hostPolicy(env);
  if (!host || !hostAllowed(host, policy)) {
    return {
      status: 403,
      code: 'foreign_host',
      message:
        `Host ${JSON.stringify(shown(rawHost))} is not a name this UI answers to: ${acceptedHosts(policy)}. ` +
        'A page reaching the UI under another name (DNS rebinding) is refused; list a name of your own in AITK_UI_ALLOWED_HOSTS.',
    };
  }
  const ownHost = rawHost.trim().toLowerCase();
  const own = `http://${ownHost}`;
  // the Origin decides; without one, the Referer; a request with neither is a typed address or a bookmark
  const origin = req.headers.get('origin');
  const [header, source] = origin !== null ? ['Origin', origin] : ['Referer', req.headers.get('referer')];
  if (source !== null && !isOwnOrigin(source, ownHost)) {
    return {
      status: 403,
      code: 'foreign_origin',
      message:
        `This request comes from another web page (${header}: ${shown(source)}), not from this UI (${own}); ` +
        'the UI obeys its own pages only. Open it by its address or a bookmark.',
    };
  }
  const site = (req.headers.get('sec-fetch-site') || '').toLowerCase();
  if (site === 'cross-site' || site === 'same-site') {
    return {
      status: 403,
      code: 'foreign_origin',
      message: `The browser says another site made this request (Sec-Fetch-Site: ${site}), not this UI (${own}); the UI obeys its own pages only.`,
    };
  }
  if (BODILESS.has(method)) return null;

  const declared = Number(req.headers.get('content-length') || 0);
  if (declared > MAX_UPLOAD_BYTES) {
    return { status: 413, code: 'too_large', message: `A request body may be at most ${MAX_UPLOAD_BYTES / (1024 * 1024)} MiB; this one is ${declared} bytes.` };
  }
  const type = (req.headers.get('content-type') || '').split(';')[0].trim().toLowerCase();
  const hasBody = declared > 0 || req.headers.has('transfer-encoding');
  if (!hasBody && !type) return null; // a bare POST (start, stop, cancel)
  const accepted = FILE_BODIES[`${method} ${pathname}`] ?? JSON_BODY;
  if (typeAccepted(type, accepted)) return null;
  return {
    status: 415,
    code: 'unsupported_media_type',
    message: `${method} ${pathname} takes ${accepted.join(', ')} (Content-Type: ${type ? shown(type) : 'none'}).`,
  };
}
