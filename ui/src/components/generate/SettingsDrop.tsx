'use client';
// "Drop a generated file here to restore its settings": a file dropped anywhere on the page (or on
// this zone, or picked) goes to the engine's POST /settings; the page fills its forms from the
// answer. Input-image slots take their own drops first (they stop the event), so a drop there is an
// input, anywhere else a restore.
import { useEffect, useRef, useState } from 'react';

export interface RestoreNotice {
  busy: boolean;
  fileName: string | null;
  error: string | null;
  /** where the settings came from ('aitk' | 'a1111'), and what did not carry over */
  source: string | null;
  warnings: string[];
}

export const NO_RESTORE: RestoreNotice = { busy: false, fileName: null, error: null, source: null, warnings: [] };

interface Props {
  notice: RestoreNotice;
  onFile: (file: File) => void;
  onDismiss: () => void;
}

const hasFiles = (e: DragEvent) => Array.from(e.dataTransfer?.types ?? []).includes('Files');

/** A file dropped anywhere on the window goes to `onFile`; whether one is being dragged over it now. */
function useWindowFileDrop(onFile: (file: File) => void): boolean {
  const [dragging, setDragging] = useState(false);
  const depth = useRef(0);
  const onFileRef = useRef(onFile);
  onFileRef.current = onFile;

  useEffect(() => {
    const enter = (e: DragEvent) => {
      if (!hasFiles(e)) return;
      depth.current += 1;
      setDragging(true);
    };
    const leave = (e: DragEvent) => {
      if (!hasFiles(e)) return;
      depth.current = Math.max(0, depth.current - 1);
      if (depth.current === 0) setDragging(false);
    };
    const over = (e: DragEvent) => {
      if (!hasFiles(e)) return;
      e.preventDefault(); // a drop here is ours, not the browser opening the file
      if (e.dataTransfer) e.dataTransfer.dropEffect = 'copy';
    };
    // every drop ends the drag, also one an input slot takes (it stops the event before the window's bubble phase)
    const reset = () => {
      depth.current = 0;
      setDragging(false);
    };
    const drop = (e: DragEvent) => {
      if (!hasFiles(e)) return;
      e.preventDefault();
      const file = e.dataTransfer?.files?.[0];
      if (file) onFileRef.current(file);
    };
    window.addEventListener('dragenter', enter);
    window.addEventListener('dragleave', leave);
    window.addEventListener('dragover', over);
    window.addEventListener('drop', drop);
    window.addEventListener('drop', reset, true);
    window.addEventListener('dragend', reset, true);
    return () => {
      window.removeEventListener('drop', reset, true);
      window.removeEventListener('dragend', reset, true);
      window.removeEventListener('dragenter', enter);
      window.removeEventListener('dragleave', leave);
      window.removeEventListener('dragover', over);
      window.removeEventListener('drop', drop);
    };
  }, []);
  return dragging;
}

export default function SettingsDrop({ notice, onFile, onDismiss }: Props) {
  const dragging = useWindowFileDrop(onFile);
  const input = useRef<HTMLInputElement>(null);

  return (
    <section className={`card settings-drop${dragging ? ' dragging' : ''}`} aria-label="Restore settings from a file" data-testid="settings-drop">
      <div className="row wrap small">
        <span className="grow">
          Drop a generated file anywhere on this page to restore its settings, or{' '}
          <button type="button" className="link" onClick={() => input.current?.click()} disabled={notice.busy}>
            pick one
          </button>
          .
        </span>
        {notice.busy && <span className="muted">reading {notice.fileName}…</span>}
      </div>
      <input
        ref={input}
        type="file"
        hidden
        accept="image/png,image/jpeg,image/webp,video/mp4,video/webm,audio/wav,audio/x-wav,audio/flac,audio/mpeg,.png,.jpg,.jpeg,.webp,.mp4,.webm,.wav,.flac,.mp3"
        aria-label="A generated file to restore the settings of"
        data-testid="settings-file"
        onChange={(e) => {
          const f = e.target.files?.[0];
          if (f) onFile(f);
          e.target.value = '';
        }}
      />
      {dragging && (
        <div className="drop-banner" data-testid="drop-banner">
          Drop on an input slot to use the file as an input; anywhere else to restore its settings.
        </div>
      )}
      {!notice.busy && (notice.error || notice.source) && <RestoreNoticeBox notice={notice} onDismiss={onDismiss} />}
    </section>
  );
}

/** What restoring the file's settings came to: an error, or where they came from and what did not carry over. */
function RestoreNoticeBox({ notice, onDismiss }: { notice: RestoreNotice; onDismiss: () => void }) {
  return (
    <div className={`alert ${notice.error ? 'error' : notice.warnings.length ? 'warn' : 'ok'} small`} data-testid="settings-notice" role="status">
      {notice.error ? (
        <>Could not restore the settings of {notice.fileName}: {notice.error}</>
      ) : (
        <>
          Restored the settings of {notice.fileName} ({notice.source === 'aitk' ? 'made here' : `${notice.source} text`}).
          {notice.warnings.length > 0 && (
            <ul className="warnings">
              {notice.warnings.map((w) => (
                <li key={w}>{w}</li>
              ))}
            </ul>
          )}
        </>
      )}{' '}
      <button type="button" className="link" onClick={onDismiss}>
        dismiss
      </button>
    </div>
  );
}
