// Failed responses -> words a person can read (the UI's own errors, and the engine's via the proxy).
import { describe, expect, it } from 'vitest';
import { describeError } from '@/utils/api';

const res = (status: number, body: unknown, statusText = '') =>
  new Response(typeof body === 'string' ? body : JSON.stringify(body), { status, statusText });

describe('describeError', () => {
  it("uses the UI's own {error, message}", async () => {
    expect(await describeError(res(503, { error: 'engine_not_running', message: 'The inference engine is not running.' }))).toEqual({
      message: 'The inference engine is not running.',
      code: 'engine_not_running',
    });
  });

  it("explains an engine 4xx with its field-naming detail", async () => {
    const out = await describeError(res(422, { detail: 'sample.width: 1000 is not a multiple of 16', field: 'sample.width' }));
    expect(out.message).toBe('The engine refused the request (HTTP 422): sample.width: 1000 is not a multiple of 16');
  });

  it('flattens a validation error list', async () => {
    const detail = [{ type: 'extra_forbidden', loc: ['body', 'stream', 'bogus'], msg: 'Extra inputs are not permitted' }];
    expect((await describeError(res(422, { detail }))).message).toBe('The engine refused the request (HTTP 422): stream.bogus: Extra inputs are not permitted');
  });

  it('calls an engine 503/409 busy', async () => {
    expect((await describeError(res(409, { detail: 'a request is running or queued' }))).message).toBe('The engine is busy: a request is running or queued.');
    expect((await describeError(res(503, { detail: 'the engine is stopping' }))).code).toBe('engine_busy');
  });

  it('falls back to the status and a snippet of a non-JSON body', async () => {
    expect((await describeError(res(502, '<html>Bad gateway</html>', 'Bad Gateway'))).message).toBe('HTTP 502 Bad Gateway: <html>Bad gateway</html>');
  });
});
