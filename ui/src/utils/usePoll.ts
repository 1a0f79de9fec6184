'use client';
// Run `fn` now and then every `ms` while mounted (and `enabled`); never overlapping.
import { useEffect, useRef } from 'react';

export function usePoll(fn: () => Promise<void> | void, ms: number, enabled = true, deps: unknown[] = []): void {
  const fnRef = useRef(fn);
  fnRef.current = fn;
  useEffect(() => {
    if (!enabled) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      try {
        await fnRef.current();
      } catch (err) {
        console.warn('poll failed', err);
      }
      if (!stopped) timer = setTimeout(run, ms);
    };
    run();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [ms, enabled, ...deps]);
}
