// Where `npm run start` lets Next listen. The UI can start processes (jobs, the engine), so by
// default it listens on loopback only; another interface needs AI_TOOLKIT_AUTH (every /api/*
// route then asks for the token). Pure, for scripts/start.mjs and its test.

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1', '[::1]', 'ip6-localhost']);

export function isLoopback(host) {
  const h = String(host).trim().toLowerCase();
  return LOOPBACK.has(h) || /^127(\.\d{1,3}){3}$/.test(h) || h === '::ffff:127.0.0.1';
}

/** { host } to listen on, or { error } to print before exiting. */
export function listenHost(env) {
  const host = (env.AITK_UI_HOST || '').trim() || '127.0.0.1';
  if (isLoopback(host)) return { host };
  if ((env.AI_TOOLKIT_AUTH || '').trim()) return { host };
  return {
    error:
      `AITK_UI_HOST=${host} would let anyone who can reach this machine start processes through the UI, ` +
      'and AI_TOOLKIT_AUTH is not set. Set AI_TOOLKIT_AUTH to a secret token (the pages ask for it once), ' +
      'or leave AITK_UI_HOST unset to listen on 127.0.0.1 only.',
  };
}
