// Numbers for people.

export function formatBytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 100 || i === 0 ? v.toFixed(0) : v.toFixed(1)} ${units[i]}`;
}

export function formatSeconds(s: number | null | undefined): string {
  if (s === null || s === undefined || !Number.isFinite(s) || s < 0) return '–';
  if (s < 59.5) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const whole = Math.round(s);
  const m = Math.floor(whole / 60);
  const sec = whole % 60;
  if (m < 60) return `${m} min ${sec} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/** How long a request took: its run (the engine's own clock) and, apart, the wait before it (submit to
 * result, less the run) once that is a second or more: "12.3 s (waited 1 min 16 s)". No run known:
 * the whole time. */
export function runAndWaitText(runS: number | null | undefined, totalS: number | null | undefined): string {
  const run = runS ?? null;
  if (run === null || !Number.isFinite(run) || run < 0) return formatSeconds(totalS);
  // the run to a tenth of a second under a minute: "12.3 s", as the engine times it
  const runText = run < 59.95 ? `${run.toFixed(1)} s` : formatSeconds(run);
  const wait = totalS !== null && totalS !== undefined && Number.isFinite(totalS) ? totalS - run : 0;
  return wait >= 1 ? `${runText} (waited ${formatSeconds(wait)})` : runText;
}
