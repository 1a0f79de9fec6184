'use client';
// The live preview on a canvas: the engine's decoded preview image (a tiny autoencoder's), or the
// latent projected here. Video latents get a frame scrubber and auto-play; audio latents are a
// channel x time heatmap.
import { useEffect, useRef, useState } from 'react';
import type { PreviewImage } from '@/utils/engineStream';

interface Props {
  image: PreviewImage | null;
  step: number | null;
  modality: string | null;
  /** the request's phase: the empty box waits only while one is active, and says when it failed */
  phase?: string;
}

/** What the empty preview box says, by the request's phase. */
function emptyText(phase: string, modality: string | null): string {
  if (phase === 'error' || phase === 'lost') return 'No preview: the request failed (see below).';
  if (phase === 'cancelled') return 'No preview: the request ended before the first latent.';
  if (phase === 'submitting' || phase === 'running' || phase === 'reattaching') return modality ? 'Waiting for the first latent…' : 'Sending the request…';
  return 'The preview appears here while a generation runs.';
}

export default function LatentCanvas({ image, step, modality, phase = 'idle' }: Props) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const [frame, setFrame] = useState(0);
  const [playing, setPlaying] = useState(true);
  const frames = image?.frames.length ?? 0;
  const shown = frames ? Math.min(frame, frames - 1) : 0;

  useEffect(() => {
    if (!playing || frames < 2) return;
    const t = setInterval(() => setFrame((f) => (f + 1) % frames), 300);
    return () => clearInterval(t);
  }, [playing, frames]);

  useEffect(() => {
    const c = canvas.current;
    if (!c) return;
    if (!image) {
      c.removeAttribute('data-step');
      const ctx = c.getContext('2d');
      ctx?.clearRect(0, 0, c.width, c.height);
      return;
    }
    if (c.width !== image.width) c.width = image.width;
    if (c.height !== image.height) c.height = image.height;
    const ctx = c.getContext('2d');
    if (!ctx) return;
    ctx.putImageData(new ImageData(new Uint8ClampedArray(image.frames[shown]), image.width, image.height), 0, 0);
    // which latent step the pixels show (set after drawing, so a reader sees both together)
    c.dataset.step = String(step ?? '');
    c.dataset.frame = String(shown);
  }, [image, shown, step]);

  const heat = image?.mode === 'heatmap';
  const label = heat ? 'Audio latent: channels by time' : image?.mode === 'decoded' ? 'Preview image (decoded by the engine)' : 'Latent preview';
  return (
    <div className="latent">
      <canvas
        ref={canvas}
        width={64}
        height={64}
        data-testid="preview-canvas"
        data-mode={image?.mode}
        className={!image ? 'empty' : heat ? 'heatmap' : 'picture'}
        style={image && !heat ? { aspectRatio: `${image.width} / ${image.height}` } : undefined}
        aria-label={label}
      />
      {!image && (
        <div className={`canvas-empty small ${phase === 'error' || phase === 'lost' ? 'failed' : 'muted'}`} data-testid="canvas-empty" data-phase={phase}>
          {emptyText(phase, modality)}
        </div>
      )}
      {heat && <div className="muted small">channels (rows) × time (columns)</div>}
      {frames > 1 && (
        <FrameScrubber
          frames={frames}
          shown={shown}
          playing={playing}
          onPlaying={setPlaying}
          onFrame={(f) => {
            setPlaying(false);
            setFrame(f);
          }}
        />
      )}
    </div>
  );
}

/** A video latent's frames: play/pause, and a slider to one frame (which pauses). */
function FrameScrubber(props: { frames: number; shown: number; playing: boolean; onPlaying: (p: boolean) => void; onFrame: (f: number) => void }) {
  const { frames, shown, playing, onPlaying, onFrame } = props;
  return (
    <div className="row">
      <label className="small">
        <input type="checkbox" checked={playing} onChange={(e) => onPlaying(e.target.checked)} /> play
      </label>
      <input
        type="range"
        min={0}
        max={frames - 1}
        value={shown}
        onChange={(e) => onFrame(Number(e.target.value))}
        aria-label="Video frame"
      />
      <span className="small">
        frame {shown + 1}/{frames}
      </span>
    </div>
  );
}
