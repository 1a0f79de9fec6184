'use client';
// The engine's preprocessors (GET /preprocessors) and upscalers (GET /upscalers), read once per running
// engine for the Control panels, the Hires section and the Upscale action; an older engine (404) or a
// failed read leaves a list empty. The map preview is POST /preprocess.
import { useEffect, useState } from 'react';
import { apiFetch, describeError } from '@/utils/api';
import type { PreprocessorInfo, UpscalerInfo } from './controlHires';
import type { ControlForm } from './types';

export interface ControlLists {
  preprocessors: PreprocessorInfo[];
  upscalers: UpscalerInfo[];
}

const EMPTY: ControlLists = { preprocessors: [], upscalers: [] };

async function readList<T>(url: string, key: string): Promise<T[]> {
  const res = await apiFetch(url);
  if (!res.ok) return [];
  const body = (await res.json()) as Record<string, unknown>;
  return Array.isArray(body[key]) ? (body[key] as T[]) : [];
}

export function useControlLists(jobId: string | null, enabled: boolean): ControlLists {
  const [lists, setLists] = useState<ControlLists>(EMPTY);
  useEffect(() => {
    if (!enabled || !jobId) return;
    let cancelled = false;
    const q = `job=${encodeURIComponent(jobId)}`;
    Promise.all([
      readList<PreprocessorInfo>(`/api/inference/preprocessors?${q}`, 'preprocessors').catch(() => []),
      readList<UpscalerInfo>(`/api/inference/upscalers?${q}`, 'upscalers').catch(() => []),
    ]).then(([preprocessors, upscalers]) => !cancelled && setLists({ preprocessors, upscalers }));
    return () => {
      cancelled = true;
    };
  }, [jobId, enabled]);
  return lists;
}

/** POST /preprocess: the map a panel's image and preprocessor give (a data URL), or throws the engine's words. */
export async function previewMap(jobId: string, c: ControlForm): Promise<{ image: string; width: number; height: number }> {
  const body: Record<string, unknown> = { image: c.image, preprocessor: c.preprocessor || 'none', format: 'json' };
  for (const k of ['processor_res', 'threshold_a', 'threshold_b'] as const) if (c[k] !== null && Number.isFinite(c[k])) body[k] = c[k];
  const res = await apiFetch(`/api/inference/preprocess?job=${encodeURIComponent(jobId)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error((await describeError(res)).message);
  return (await res.json()) as { image: string; width: number; height: number };
}
