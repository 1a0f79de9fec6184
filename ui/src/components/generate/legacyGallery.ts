'use client';
// Once per browser: the gallery older pages kept in localStorage ('aitk.gallery') moves into the
// server's history (POST /api/history, oldest first), then the key is cleared.
import { apiFetch } from '@/utils/api';

const LEGACY_KEY = 'aitk.gallery';

let moving: Promise<string | null> | null = null;

/** A note for the page when some items could not be moved (kept for the next load), else null. */
export function moveLegacyGallery(): Promise<string | null> {
  moving ??= move().finally(() => {
    moving = null;
  });
  return moving;
}

async function move(): Promise<string | null> {
  let items: unknown;
  try {
    const raw = window.localStorage.getItem(LEGACY_KEY);
    if (raw === null) return null;
    items = JSON.parse(raw);
  } catch {
    items = null; // unreadable: nothing to move
  }
  if (!Array.isArray(items)) {
    window.localStorage.removeItem(LEGACY_KEY);
    return null;
  }
  let unreachable = 0;
  let refused = 0;
  for (const item of [...items].reverse()) {
    const res = await apiFetch('/api/history', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(item) }).catch(() => null);
    if (!res || res.status >= 500 || res.status === 401) unreachable++;
    else if (!res.ok) refused++; // an item the history cannot take (malformed): dropped
  }
  if (unreachable) return `${unreachable} result(s) of this browser's old gallery could not be moved to the history yet; they will be tried again on the next load.`;
  window.localStorage.removeItem(LEGACY_KEY);
  return refused ? `${refused} result(s) of this browser's old gallery were unreadable and were left out of the history.` : null;
}
