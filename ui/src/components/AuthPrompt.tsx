'use client';
// Asks once for the AI_TOOLKIT_AUTH token when an /api call answers 401, and keeps it.
import { useEffect, useState } from 'react';
import { AUTH_REQUIRED_EVENT, getAuthToken, setAuthToken } from '@/utils/api';

export default function AuthPrompt() {
  const [open, setOpen] = useState(false);
  const [value, setValue] = useState('');
  const [hadToken, setHadToken] = useState(false);

  useEffect(() => {
    const onRequired = () => {
      setHadToken(!!getAuthToken());
      setOpen(true);
    };
    window.addEventListener(AUTH_REQUIRED_EVENT, onRequired);
    return () => window.removeEventListener(AUTH_REQUIRED_EVENT, onRequired);
  }, []);

  if (!open) return null;
  return (
    <div className="modal-backdrop" role="dialog" aria-modal="true" aria-labelledby="auth-title">
      <form
        className="modal"
        onSubmit={(e) => {
          e.preventDefault();
          setAuthToken(value.trim() || null);
          window.location.reload();
        }}
      >
        <h2 id="auth-title">Access token</h2>
        <p>
          {hadToken ? 'The saved token was refused. ' : ''}This server was started with <code>AI_TOOLKIT_AUTH</code>. Enter that
          value; this browser keeps it.
        </p>
        <input type="password" autoFocus value={value} onChange={(e) => setValue(e.target.value)} aria-label="Access token" />
        <div className="row">
          <button type="submit" className="primary">
            Save
          </button>
        </div>
      </form>
    </div>
  );
}
