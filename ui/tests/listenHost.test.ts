// scripts/start.mjs listens on loopback unless told otherwise, and refuses another interface without auth.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error a plain .mjs script without types
import { isLoopback, listenHost } from '../scripts/listenHost.mjs';

describe('listenHost', () => {
  it('defaults to 127.0.0.1', () => {
    expect(listenHost({})).toEqual({ host: '127.0.0.1' });
    expect(listenHost({ AITK_UI_HOST: '  ' })).toEqual({ host: '127.0.0.1' });
  });
  it('takes any loopback host without auth', () => {
    for (const h of ['127.0.0.1', 'localhost', '::1', '127.0.0.5']) {
      expect(isLoopback(h)).toBe(true);
      expect(listenHost({ AITK_UI_HOST: h })).toEqual({ host: h });
    }
  });
  it('refuses another interface without AI_TOOLKIT_AUTH, takes it with', () => {
    for (const h of ['0.0.0.0', '::', '192.168.1.4', 'myhost']) {
      expect(isLoopback(h)).toBe(false);
      expect(listenHost({ AITK_UI_HOST: h }).error).toMatch(/AI_TOOLKIT_AUTH/);
      expect(listenHost({ AITK_UI_HOST: h, AI_TOOLKIT_AUTH: '' }).error).toMatch(/AI_TOOLKIT_AUTH/);
      expect(listenHost({ AITK_UI_HOST: h, AI_TOOLKIT_AUTH: 'secret' })).toEqual({ host: h });
    }
  });
  it('start.mjs exits with the message before starting anything', () => {
    const script = path.join(__dirname, '..', 'scripts', 'start.mjs');
    let out = '';
    let status = 0;
    try {
      execFileSync(process.execPath, [script], { env: { ...process.env, AITK_UI_HOST: '0.0.0.0', AI_TOOLKIT_AUTH: '' }, stdio: 'pipe' });
    } catch (err) {
      const e = err as { status: number; stderr: Buffer };
      status = e.status;
      out = e.stderr.toString();
    }
    expect(status).toBe(2);
    expect(out).toMatch(/refusing to start.*AI_TOOLKIT_AUTH/);
  });
});
