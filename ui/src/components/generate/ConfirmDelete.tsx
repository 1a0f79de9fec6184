'use client';
// An inline "Delete? yes / no": focus goes to "Keep" (a stray Enter deletes nothing), Escape keeps.
import { useEffect, useRef, useState } from 'react';

interface Props {
  question: string;
  onConfirm: () => Promise<void>;
  onCancel: () => void;
}

export default function ConfirmDelete({ question, onConfirm, onCancel }: Props) {
  const keep = useRef<HTMLButtonElement>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => keep.current?.focus(), []);
  return (
    <div
      className="confirm-delete row wrap"
      role="group"
      aria-label="Confirm delete"
      data-testid="confirm-delete"
      onKeyDown={(e) => {
        if (e.key === 'Escape') {
          e.stopPropagation();
          onCancel();
        }
      }}
    >
      <span>{question}</span>
      <button
        className="danger"
        disabled={busy}
        data-testid="confirm-delete-yes"
        onClick={async () => {
          setBusy(true);
          try {
            await onConfirm();
          } finally {
            setBusy(false);
          }
        }}
      >
        Yes, delete
      </button>
      <button ref={keep} onClick={onCancel} data-testid="confirm-delete-no">
        Keep
      </button>
    </div>
  );
}
