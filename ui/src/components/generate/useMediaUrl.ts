'use client';
// A URL the browser can put in <img>/<video>/<audio>. Without AI_TOOLKIT_AUTH that is the
// /api/files URL itself; with it, the file is fetched with the token and shown as a blob URL.
import { useEffect, useState } from 'react';
import { apiFetch, getAuthToken } from '@/utils/api';

export function useMediaUrl(url: string): { src: string | null; error: string | null } {
  const [state, setState] = useState<{ src: string | null; error: string | null }>({ src: null, error: null });
  useEffect(() => {
    if (!getAuthToken()) {
      setState({ src: url, error: null });
      return;
    }
    let objectUrl: string | null = null;
    let cancelled = false;
    apiFetch(url)
      .then(async (res) => {
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
        objectUrl = URL.createObjectURL(await res.blob());
        if (!cancelled) setState({ src: objectUrl, error: null });
      })
      .catch((err) => !cancelled && setState({ src: null, error: (err as Error).message }));
    return () => {
      cancelled = true;
      if (objectUrl) URL.revokeObjectURL(objectUrl);
    };
  }, [url]);
  return state;
}
