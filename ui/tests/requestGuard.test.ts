// The request guard (src/server/requestGuard.ts, run by src/proxy.ts on every request) as a table:
// Host names per bind, Origin / Referer / Sec-Fetch-Site, methods, body types, each with
// AI_TOOLKIT_AUTH off and on (the right token changes nothing).
import { describe, expect, it } from 'vitest';
import { proxy } from '@/proxy';
import { isLoopbackBind, requestRefusal } from '@/server/requestGuard';
import { MAX_UPLOAD_BYTES } from '@/server/uploadLimits';
// @ts-expect-error a plain .mjs script without types
import { isLoopback } from '../scripts/listenHost.mjs';

type Env = Record<string, string>;
const HOST = '127.0.0.1:8675';

function request(method: string, path: string, headers: Record<string, string>, auth: boolean): Request {
  return new Request(`http://127.0.0.1:8675${path}`, {
    method,
    headers: { host: HOST, ...(auth ? { authorization: 'Bearer let-me-in' } : {}), ...headers },
  });
}

/** The refusal's code, or 'ok'. */
function verdict(method: string, path: string, headers: Record<string, string>, env: Env, auth: boolean): string {
  const refused = requestRefusal(request(method, path, headers, auth), auth ? { ...env, AI_TOOLKIT_AUTH: 'let-me-in' } : env);
  return refused ? `${refused.status} ${refused.code}` : 'ok';
}

const HOST_403 = '403 foreign_host';
const ORIGIN_403 = '403 foreign_origin';
const TYPE_415 = '415 unsupported_media_type';

// [bind env, Host header, verdict]
const HOSTS: [Env, string, string][] = [
  // the default loopback bind: loopback names and addresses, with or without the port
  ...['127.0.0.1:8675', '127.0.0.1', 'localhost:8675', 'localhost', 'LocalHost:8675', '[::1]:8675', '[::1]', '127.0.0.5:8675'].map(
    (h): [Env, string, string] => [{}, h, 'ok'],
  ),
  ...[
    'evil.example:8675', 'evil.example', '192.168.1.4:8675', '0.0.0.0:8675', '[fe80::1]:8675', 'foo.localhost:8675', 'localhost.:8675',
    '127.0.0.1.evil.example', '', 'evil.example@127.0.0.1', '127.0.0.1:8675 x', '::1', '127.0.0.1:8675:1', '127.0.0.256',
  ].map((h): [Env, string, string] => [{}, h, HOST_403]),
  [{ AITK_UI_HOST: 'localhost' }, 'evil.example:8675', HOST_403],
  [{ AITK_UI_HOST: '::1' }, '[::1]:8675', 'ok'],
  // names listed in AITK_UI_ALLOWED_HOSTS (any port, or the one given), on any bind
  [{ AITK_UI_ALLOWED_HOSTS: 'ui.lan, box.example:9000' }, 'ui.lan:8675', 'ok'],
  [{ AITK_UI_ALLOWED_HOSTS: 'ui.lan, box.example:9000' }, 'UI.LAN', 'ok'],
  [{ AITK_UI_ALLOWED_HOSTS: 'ui.lan, box.example:9000' }, 'box.example:9000', 'ok'],
  [{ AITK_UI_ALLOWED_HOSTS: 'ui.lan, box.example:9000' }, 'box.example:8675', HOST_403],
  [{ AITK_UI_ALLOWED_HOSTS: 'ui.lan, box.example:9000' }, 'evil.example', HOST_403],
  [{ AITK_UI_ALLOWED_HOSTS: '*' }, 'evil.example', HOST_403],
  // another bind: also IP literals (nothing to rebind) and the bound name
  ...['192.168.1.4:8675', '10.0.0.1', '[fe80::1]:8675', 'localhost:8675'].map((h): [Env, string, string] => [{ AITK_UI_HOST: '0.0.0.0' }, h, 'ok']),
  [{ AITK_UI_HOST: '0.0.0.0' }, 'evil.example:8675', HOST_403],
  [{ AITK_UI_HOST: '::' }, '[2001:db8::5]:8675', 'ok'],
  [{ AITK_UI_HOST: 'myhost.lan' }, 'myhost.lan:8675', 'ok'],
  [{ AITK_UI_HOST: 'myhost.lan' }, 'evil.example:8675', HOST_403],
  [{ AITK_UI_HOST: '0.0.0.0', AITK_UI_ALLOWED_HOSTS: 'ui.example.com' }, 'ui.example.com', 'ok'],
];

// [headers besides Host 127.0.0.1:8675, verdict]
const SOURCES: [Record<string, string>, string][] = [
  [{}, 'ok'], // a bookmark, a typed address, curl
  [{ origin: 'http://127.0.0.1:8675' }, 'ok'],
  [{ origin: 'https://127.0.0.1:8675' }, 'ok'], // TLS in front, same host and port
  [{ origin: 'http://evil.example' }, ORIGIN_403],
  [{ origin: 'null' }, ORIGIN_403],
  [{ origin: 'http://127.0.0.1:8676' }, ORIGIN_403],
  [{ origin: 'http://127.0.0.1' }, ORIGIN_403],
  [{ origin: 'http://localhost:8675' }, ORIGIN_403], // another origin, though a name of this UI
  [{ origin: 'file://' }, ORIGIN_403],
  [{ origin: 'chrome-extension://abcdef' }, ORIGIN_403],
  [{ origin: 'not a url' }, ORIGIN_403],
  [{ referer: 'http://127.0.0.1:8675/generate?job=x' }, 'ok'],
  [{ referer: 'http://evil.example/page' }, ORIGIN_403],
  [{ referer: 'http://127.0.0.1:8675@evil.example/' }, ORIGIN_403],
  [{ origin: 'http://127.0.0.1:8675', referer: 'http://evil.example/' }, 'ok'], // the Origin decides
  [{ origin: 'http://evil.example', referer: 'http://127.0.0.1:8675/' }, ORIGIN_403],
  [{ 'sec-fetch-site': 'same-origin', origin: 'http://127.0.0.1:8675' }, 'ok'],
  [{ 'sec-fetch-site': 'none' }, 'ok'],
  [{ 'sec-fetch-site': 'cross-site' }, ORIGIN_403],
  [{ 'sec-fetch-site': 'same-site' }, ORIGIN_403],
];

// [method, path, headers, verdict] (a same-origin request; content-length says there is a body)
const BODY = { 'content-length': '12' };
const BODIES: [string, string, Record<string, string>, string][] = [
  ['POST', '/api/jobs', { ...BODY, 'content-type': 'application/json' }, 'ok'],
  ['POST', '/api/jobs', { ...BODY, 'content-type': 'application/json; charset=utf-8' }, 'ok'],
  ['POST', '/api/jobs', { ...BODY, 'content-type': 'Application/JSON' }, 'ok'],
  ['POST', '/api/jobs', { ...BODY, 'content-type': 'text/plain' }, TYPE_415],
  ['POST', '/api/jobs', { ...BODY, 'content-type': 'text/plain;charset=UTF-8' }, TYPE_415],
  ['POST', '/api/jobs', { ...BODY, 'content-type': 'application/x-www-form-urlencoded' }, TYPE_415],
  ['POST', '/api/jobs', { ...BODY, 'content-type': 'multipart/form-data; boundary=x' }, TYPE_415],
  ['POST', '/api/jobs', { ...BODY, 'content-type': 'application/jsonx' }, TYPE_415],
  ['POST', '/api/jobs', BODY, TYPE_415],
  ['POST', '/api/jobs', { 'transfer-encoding': 'chunked' }, TYPE_415],
  ['POST', '/api/jobs/x/start', {}, 'ok'], // a bare POST
  ['POST', '/api/jobs/x/start', { 'content-length': '0' }, 'ok'],
  ['POST', '/api/jobs/x/start', { 'content-type': 'text/plain' }, TYPE_415],
  ['DELETE', '/api/history/x', {}, 'ok'],
  ['PUT', '/api/inference/x', { ...BODY, 'content-type': 'text/plain' }, TYPE_415],
  ['PATCH', '/api/jobs/x', { ...BODY, 'content-type': 'text/plain' }, TYPE_415],
  ['POST', '/api/inference/generate', { ...BODY, 'content-type': 'application/json' }, 'ok'],
  ['POST', '/api/inference/generate', { ...BODY, 'content-type': 'image/png' }, TYPE_415],
  ['POST', '/api/history', { ...BODY, 'content-type': 'text/plain' }, TYPE_415],
  ['GET', '/api/jobs', { 'content-type': 'text/plain' }, 'ok'], // no body on a GET
  ['POST', '/jobs', { ...BODY, 'content-type': 'text/plain' }, TYPE_415], // a page
  // the file routes keep their own types
  ['POST', '/api/grids', { ...BODY, 'content-type': 'image/png' }, 'ok'],
  ['POST', '/api/grids', { ...BODY, 'content-type': 'application/json' }, TYPE_415],
  ['POST', '/api/grids', { ...BODY, 'content-type': 'text/plain' }, TYPE_415],
  ['POST', '/api/inference/assets', { ...BODY, 'content-type': 'image/jpeg' }, 'ok'],
  ['POST', '/api/inference/assets', { ...BODY, 'content-type': 'video/mp4' }, 'ok'],
  ['POST', '/api/inference/assets', { ...BODY, 'content-type': 'application/octet-stream' }, 'ok'],
  ['POST', '/api/inference/assets', { ...BODY, 'content-type': 'text/plain' }, TYPE_415],
  ['POST', '/api/inference/assets', { ...BODY, 'content-type': 'multipart/form-data; boundary=x' }, TYPE_415],
  ['POST', '/api/inference/settings', { ...BODY, 'content-type': 'application/octet-stream' }, 'ok'],
  ['POST', '/api/inference/settings', { ...BODY, 'content-type': 'audio/wav' }, 'ok'],
  ['POST', '/api/inference/settings', { ...BODY, 'content-type': 'text/plain' }, TYPE_415],
  ['POST', '/api/grids', { 'content-length': String(MAX_UPLOAD_BYTES + 1), 'content-type': 'image/png' }, '413 too_large'],
  ['POST', '/api/grids', { 'content-length': String(MAX_UPLOAD_BYTES), 'content-type': 'image/png' }, 'ok'],
];

const METHODS = ['GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE'];

for (const auth of [false, true]) {
  describe(`request guard, AI_TOOLKIT_AUTH ${auth ? 'on (with the right token)' : 'off'}`, () => {
    it('Host: loopback names on a loopback bind, more on another bind or when listed', () => {
      for (const [env, host, want] of HOSTS) {
        expect(verdict('GET', '/api/jobs', { host }, env, auth), `${JSON.stringify(env)} Host ${JSON.stringify(host)}`).toBe(want);
      }
    });

    it('Origin, else Referer, and Sec-Fetch-Site: only the UI itself, on every method and path', () => {
      for (const [headers, want] of SOURCES) {
        for (const method of METHODS) {
          for (const path of ['/api/jobs', '/api/inference/generate', '/generate', '/_next/static/x.js']) {
            expect(verdict(method, path, headers, {}, auth), `${method} ${path} ${JSON.stringify(headers)}`).toBe(want);
          }
        }
      }
    });

    it('the own origin is the request\'s own allowed Host, default ports as browsers write them', () => {
      const cases: [string, string, string][] = [
        ['localhost:8675', 'http://localhost:8675', 'ok'],
        ['localhost:8675', 'http://127.0.0.1:8675', ORIGIN_403],
        ['[::1]:8675', 'http://[::1]:8675', 'ok'],
        ['localhost:80', 'http://localhost', 'ok'],
        ['localhost', 'http://localhost:80', 'ok'],
        ['localhost', 'https://localhost', 'ok'],
        ['localhost', 'http://localhost:8675', ORIGIN_403],
        ['evil.example:8675', 'http://evil.example:8675', HOST_403], // a rebinding page: its own origin, a foreign Host
      ];
      for (const [host, origin, want] of cases) {
        expect(verdict('POST', '/api/jobs/x/start', { host, origin }, {}, auth), `${host} ${origin}`).toBe(want);
      }
      const listed = { AITK_UI_ALLOWED_HOSTS: 'ui.lan' };
      expect(verdict('POST', '/api/jobs/x/start', { host: 'ui.lan', origin: 'https://ui.lan' }, listed, auth)).toBe('ok');
      expect(verdict('POST', '/api/jobs/x/start', { host: 'ui.lan', origin: 'https://ui.lan:443' }, listed, auth)).toBe('ok');
      expect(verdict('POST', '/api/jobs/x/start', { host: 'ui.lan', origin: 'http://127.0.0.1:8675' }, listed, auth)).toBe(ORIGIN_403);
    });

    it('a body is JSON unless the route takes a file; a bare POST needs no type', () => {
      for (const [method, path, headers, want] of BODIES) {
        expect(verdict(method, path, headers, {}, auth), `${method} ${path} ${JSON.stringify(headers)}`).toBe(want);
      }
      // the checks run in order: Host, then the page, then the body
      expect(verdict('POST', '/api/jobs', { host: 'evil.example', origin: 'http://evil.example', 'content-type': 'text/plain' }, {}, auth)).toBe(HOST_403);
      expect(verdict('POST', '/api/jobs', { origin: 'http://evil.example', 'content-type': 'text/plain' }, {}, auth)).toBe(ORIGIN_403);
    });
  });
}

describe('src/proxy.ts', () => {
  it('answers a refusal in the UI\'s error shape, naming why, and lets the rest through', async () => {
    const refused = proxy(request('POST', '/api/jobs', { origin: 'http://evil.example', 'content-type': 'text/plain' }, false));
    expect(refused?.status).toBe(403);
    expect(refused?.headers.get('content-type')).toBe('application/json');
    const body = await refused?.json();
    expect(body).toEqual({ error: 'foreign_origin', message: expect.stringContaining('Origin: http://evil.example') });
    const host = await proxy(request('GET', '/generate', { host: 'evil.example:8675' }, false))?.json();
    expect(host).toEqual({ error: 'foreign_host', message: expect.stringContaining('"evil.example:8675"') });
    expect(host.message).toContain('AITK_UI_ALLOWED_HOSTS');
    const plain = await proxy(request('POST', '/api/jobs', { 'content-type': 'text/plain', 'content-length': '2' }, false))?.json();
    expect(plain).toEqual({ error: 'unsupported_media_type', message: 'POST /api/jobs takes application/json (Content-Type: text/plain).' });
    expect(proxy(request('GET', '/generate', {}, false))).toBeUndefined();
  });

  it('has no matcher: Next runs it on every path', async () => {
    expect(Object.keys(await import('@/proxy'))).toEqual(['proxy']); // no `config` (matcher)
  });

  it('the bind rule agrees with scripts/listenHost.mjs', () => {
    for (const h of ['127.0.0.1', 'localhost', '::1', '[::1]', 'ip6-localhost', '127.0.0.5', '::ffff:127.0.0.1', '0.0.0.0', '::', '192.168.1.4', 'myhost', ' LOCALHOST ']) {
      expect(isLoopbackBind(h), h).toBe(isLoopback(h));
    }
  });
});
