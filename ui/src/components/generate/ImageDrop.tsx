'use client';
// One input slot (an image, or a video or audio: `kind`): drop a file (or a result dragged from the gallery) or pick one;
// it is checked by its header (mediaSignature.ts: a non-image named .png is refused here, not at
// Generate), uploaded to the engine's assets (POST /assets) and the slot holds the asset id; a
// thumbnail, Replace and Clear.
import { useRef, useState } from 'react';
import { assetUrl, droppedFile, uploadAsset } from './assets';
import { uploadRefusal, type MediaKind } from './mediaSignature';
import { assetDisplayName } from './tasks';
import { useMediaUrl } from './useMediaUrl';

interface Props {
  label: string;
  testId: string;
  assetId: string | null;
  job: { id: string; name: string } | null;
  onChange: (assetId: string | null) => void;
  /** what the slot takes, checked by the file's header (default: an image) */
  kind?: MediaKind;
}

function Thumb({ url, name, kind }: { url: string; name: string; kind: MediaKind }) {
  const { src, error } = useMediaUrl(url);
  const [broken, setBroken] = useState(false);
  if (error || broken) return <div className="thumb missing small">not available</div>;
  if (!src) return <div className="thumb missing small muted">…</div>;
  if (kind === 'video') return <video className="thumb" src={src} muted playsInline controls aria-label={name} onError={() => setBroken(true)} data-testid="input-thumb" />;
  if (kind === 'audio') return <audio src={src} controls aria-label={name} onError={() => setBroken(true)} data-testid="input-thumb" />;
  // eslint-disable-next-line @next/next/no-img-element
  return <img className="thumb" src={src} alt={name} onError={() => setBroken(true)} data-testid="input-thumb" />;
}

/** A file taken into the slot: checked to be an image by its header, uploaded to the engine's assets, its id handed on. */
function useAssetUpload(job: { id: string } | null, kind: MediaKind, onChange: (assetId: string) => void) {
  const [state, setState] = useState<{ busy: boolean; error: string | null }>({ busy: false, error: null });
  const take = async (file: File | null | undefined) => {
    if (!file) return;
    if (!job) {
      setState({ busy: false, error: 'Start the engine first: input images are uploaded to it.' });
      return;
    }
    setState({ busy: true, error: null });
    try {
      const refusal = await uploadRefusal(file, file.name, kind);
      if (refusal) {
        setState({ busy: false, error: refusal });
        return;
      }
      onChange(await uploadAsset(job.id, file, file.name || 'image.png'));
      setState({ busy: false, error: null });
    } catch (err) {
      setState({ busy: false, error: `Upload failed: ${(err as Error).message}` });
    }
  };
  return { state, setState, take };
}

export default function ImageDrop({ label, testId, assetId, job, onChange, kind = 'image' }: Props) {
  const [over, setOver] = useState(false);
  const { state, setState, take } = useAssetUpload(job, kind, onChange);
  const fileInput = useRef<HTMLInputElement>(null);

  const onDrop = (e: React.DragEvent) => {
    // this slot takes the drop: the page's "restore settings" drop does not see it
    e.preventDefault();
    e.stopPropagation();
    setOver(false);
    droppedFile(e.dataTransfer)
      .then((f) => (f ? take(f) : setState({ busy: false, error: kind === 'image' ? 'Drop an image file (or a result from the gallery).' : `Drop a${kind === 'audio' ? 'n' : ''} ${kind} file.` })))
      .catch((err) => setState({ busy: false, error: `Could not read the dropped image: ${(err as Error).message}` }));
  };

  return (
    <div
      className={`image-drop${over ? ' over' : ''}${assetId ? ' filled' : ''}`}
      data-testid={testId}
      data-asset={assetId ?? ''}
      onDragOver={(e) => {
        e.preventDefault();
        e.stopPropagation();
        e.dataTransfer.dropEffect = 'copy';
        setOver(true);
      }}
      onDragLeave={() => setOver(false)}
      onDrop={onDrop}
    >
      <div className="image-drop-label">{label}</div>
      <div className="row wrap">
        {assetId && job && <Thumb url={assetUrl(job.name, assetId)} name={assetDisplayName(assetId)} kind={kind} />}
        <div className="grow small">
          {assetId ? (
            <span className="asset-name" title={assetId}>
              {assetDisplayName(assetId)}
            </span>
          ) : (
            <span className="muted">Drop {kind === 'image' ? 'an image' : `a${kind === 'audio' ? 'n' : ''} ${kind} file`} here, or</span>
          )}{' '}
          <button type="button" disabled={state.busy} onClick={() => fileInput.current?.click()}>
            {assetId ? 'Replace' : 'Choose a file'}
          </button>{' '}
          {assetId && (
            <button type="button" onClick={() => onChange(null)} data-testid={`${testId}-clear`}>
              Clear
            </button>
          )}
          {state.busy && <span className="muted"> uploading…</span>}
        </div>
      </div>
      <input
        ref={fileInput}
        type="file"
        accept={`${kind}/*`}
        hidden
        aria-label={label}
        data-testid={`${testId}-file`}
        onChange={(e) => {
          void take(e.target.files?.[0]);
          e.target.value = ''; // the same file again is a new choice
        }}
      />
      {state.error && (
        <div className="alert error small" role="alert" data-testid={`${testId}-error`}>
          {state.error}
        </div>
      )}
    </div>
  );
}
