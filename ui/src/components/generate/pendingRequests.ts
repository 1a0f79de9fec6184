// This page's requests that have not ended, kept in localStorage so a reload re-attaches to them.

export interface PendingRequest {
  requestId: string;
  jobId: string;
  jobName: string;
  startedAt: number;
  /** the person's "keep generating when this page closes" at submission */
  keepOnClose?: boolean;
}

const KEY = 'aitk.generate.pending';
const LEGACY_KEY = 'aitk.generate.active'; // one request, as pages before the queue kept it

export function storePending(list: PendingRequest[]): void {
  try {
    if (list.length) window.localStorage.setItem(KEY, JSON.stringify(list));
    else window.localStorage.removeItem(KEY);
    window.localStorage.removeItem(LEGACY_KEY);
  } catch {
    // storage unavailable: no re-attach after a reload
  }
}

export function loadPending(): PendingRequest[] {
  try {
    const raw = window.localStorage.getItem(KEY);
    const list = raw ? (JSON.parse(raw) as PendingRequest[]) : [];
    const legacy = window.localStorage.getItem(LEGACY_KEY);
    if (legacy) list.push(JSON.parse(legacy) as PendingRequest);
    return Array.isArray(list) ? list.filter((p) => p && typeof p.requestId === 'string') : [];
  } catch {
    return [];
  }
}
