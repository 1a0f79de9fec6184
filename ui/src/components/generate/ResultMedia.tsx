'use client';
// One result's file as the page shows it: <img>, or <video>/<audio> with their controls (they play in
// place); "not available" when the file cannot be read. The gallery's cards, the preview's final result
// and the result viewer all show it this way.
import { useState } from 'react';
import type { GalleryItem } from './types';

interface Props {
  item: GalleryItem;
  src: string | null;
  error: string | null;
  testId: string;
}

export default function ResultMedia({ item, src, error, testId }: Props) {
  const [broken, setBroken] = useState(false);
  if (error || broken) return <div className="media-missing">The file is not available{error ? ` (${error})` : ''}.</div>;
  if (!src) return <div className="media-missing muted">loading…</div>;
  const kind = item.result.kind;
  const onError = () => setBroken(true);
  // a video with a soundtrack (LTX-2's) is not muted: its controls play the sound
  if (kind === 'video') return <video src={src} controls loop muted={!item.result.audio} playsInline onError={onError} data-testid={testId} data-audio={item.result.audio ? '1' : '0'} />;
  if (kind === 'audio') return <audio src={src} controls onError={onError} data-testid={testId} />;
  // eslint-disable-next-line @next/next/no-img-element
  return <img src={src} alt={String(item.sample.prompt ?? '') || 'result'} onError={onError} data-testid={testId} data-width={item.result.width ?? ''} />;
}
