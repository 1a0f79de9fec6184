'use client';
// useState that survives a reload (localStorage, JSON). Reads after mount, so the server
// render and the first client render agree.
import { useCallback, useEffect, useState } from 'react';

export function useStoredState<T>(key: string, initial: T): [T, (v: T | ((prev: T) => T)) => void, boolean] {
  const [value, setValue] = useState<T>(initial);
  const [loaded, setLoaded] = useState(false);
  useEffect(() => {
    try {
      const raw = window.localStorage.getItem(key);
      if (raw !== null) setValue(JSON.parse(raw) as T);
    } catch {
      // unreadable: keep the initial value
    }
    setLoaded(true);
  }, [key]);
  const set = useCallback(
    (v: T | ((prev: T) => T)) => {
      setValue((prev) => {
        const next = typeof v === 'function' ? (v as (p: T) => T)(prev) : v;
        try {
          window.localStorage.setItem(key, JSON.stringify(next));
        } catch {
          // storage full or disabled: the state still works for this page
        }
        return next;
      });
    },
    [key],
  );
  return [value, set, loaded];
}
