// The engine's settings, from the engine's own Python without an engine running:
// `python -m extensions_built_in.inference_engine.engine_settings --describe` (each engine.* field's
// type, bounds, default and doc; read once and kept) and `--check` (an engine block on stdin,
// answered with the ConfigError naming its key), so the settings page and the job agree on every rule.
import { execFile } from 'node:child_process';
import type { Block, SettingsDescription } from '@/components/jobs/engineSettingsForm';
import { ApiError, json } from './http';
import { UI_OWNED_ENGINE_KEYS } from './jobConfig';
import { pythonPath, repoRoot } from './paths';

const MODULE = 'extensions_built_in.inference_engine.engine_settings';
const TIMEOUT_MS = 60_000;

export type CheckAnswer = { ok: true } | { ok: false; key: string; message: string };

function runSettings(args: string[], stdin = ''): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      pythonPath(),
      ['-m', MODULE, ...args],
      { cwd: repoRoot(), timeout: TIMEOUT_MS, maxBuffer: 4 << 20, env: { ...process.env, PYTHONUNBUFFERED: '1' } },
      (err, stdout, stderr) => {
        const tail = String(stderr).trim().split('\n').slice(-3).join(' ');
        if (err) return reject(new ApiError(500, 'settings_unavailable', `The engine's settings could not be read (${pythonPath()} -m ${MODULE} ${args.join(' ')}): ${tail || err.message}`));
        try {
          resolve(JSON.parse(String(stdout)));
        } catch {
          reject(new ApiError(500, 'settings_unavailable', `The engine's settings entry printed no JSON: ${String(stdout).slice(0, 200)}`));
        }
      },
    );
    child.stdin?.end(stdin);
  });
}

let described: { python: string; answer: Promise<SettingsDescription> } | null = null;

/** The engine block's fields as the engine describes them, less the keys the UI fills in itself. */
export function describeEngineSettings(): Promise<SettingsDescription> {
  if (!described || described.python !== pythonPath()) {
    const answer = runSettings(['--describe']).then((d) => {
      const out = { ...(d as SettingsDescription) };
      for (const k of UI_OWNED_ENGINE_KEYS) delete out[k];
      return out;
    });
    answer.catch(() => {
      if (described?.answer === answer) described = null; // a failure is not kept: the next call tries again
    });
    described = { python: pythonPath(), answer };
  }
  return described.answer;
}

/** The block as the job would read it at start (with the keys the UI fills in left to it). */
export async function checkEngineBlock(block: Block): Promise<CheckAnswer> {
  const answer = (await runSettings(['--check'], JSON.stringify(block))) as CheckAnswer;
  if (answer.ok !== true && (typeof answer.key !== 'string' || typeof answer.message !== 'string')) {
    throw new ApiError(500, 'settings_unavailable', `The engine's settings check answered ${JSON.stringify(answer).slice(0, 200)}`);
  }
  return answer;
}

/** An engine block from a request body's `engine`: a JSON object, else a 400 naming it. */
export function engineBlockFromBody(body: Record<string, unknown>): Block {
  const block = body.engine;
  if (!block || typeof block !== 'object' || Array.isArray(block)) {
    throw new ApiError(400, 'bad_engine', 'engine: must be an object (the InferenceEngine process\'s engine: block).');
  }
  return block as Block;
}

/** A refused block as the routes answer it: 422 {error, key, message} with the key in the message. */
export function refusal(answer: Exclude<CheckAnswer, { ok: true }>): Response {
  return json({ error: 'bad_setting', key: answer.key, message: `${answer.key}: ${answer.message}` }, 422);
}
