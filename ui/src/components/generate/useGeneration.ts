'use client';
// This page's generation requests: POST /generate through the proxy, frames parsed as they arrive,
// latents projected for the preview, results handed to the gallery, Cancel, re-attaching (after a
// reload or a dropped connection) through GET /stream/{request_id}, and requests queued while one
// runs: the preview follows the one the engine runs, and each one's results reach the gallery.
// The hook holds React's state; the requests are a RequestBook (requestBook.ts), read by
// requestStreams.ts, sent by sendRequest.ts, ended by cancelRequests.ts.
import { useCallback, useEffect, useRef, useState } from 'react';
import { cancelOnClose, cancelShown, engineStopped as stopAll } from './cancelRequests';
import { IDLE, type GenView } from './generationView';
import { loadPending } from './pendingRequests';
import type { QueueSnapshot } from './queueView';
import { REATTACH_TRIES, RequestBook } from './requestBook';
import { onQueueAnswer, reattach } from './requestStreams';
import { sendRequest } from './sendRequest';
import type { GalleryItem } from './types';

export function useGeneration(onResult: (item: GalleryItem) => void) {
  const [view, setView] = useState<GenView>(IDLE);
  const [ours, setOurs] = useState<string[]>([]);
  const [notice, setNotice] = useState<string | null>(null);
  const onResultRef = useRef(onResult);
  onResultRef.current = onResult;
  const bookRef = useRef<RequestBook | null>(null);
  if (!bookRef.current) {
    const book: RequestBook = new RequestBook({
      setView,
      setOurs,
      setNotice,
      onResult: (item) => onResultRef.current(item),
      follow: (ctx) => void reattach(book, ctx, REATTACH_TRIES, 'follow'),
    });
    bookRef.current = book;
  }
  const book = bookRef.current;

  const generate = useCallback((job: { id: string; name: string }, body: { request_id: string } & Record<string, unknown>) => sendRequest(book, job, body), [book]);

  /** Cancel the request the preview shows. */
  const cancel = useCallback(() => cancelShown(book), [book]);

  /** One of this page's requests is being cancelled from the queue panel: its end reads as a cancel here. */
  const noteCancel = useCallback(
    (requestId: string) => {
      const ctx = book.ctxs.get(requestId);
      if (ctx) ctx.userCancelled = true;
    },
    [book],
  );

  /** A new GET /queue answer (asked at `at`): requestStreams.ts's onQueueAnswer. */
  const onQueue = useCallback((snap: QueueSnapshot, at: number) => onQueueAnswer(book, snap, at), [book]);

  /** The engine job is stopping or stopped (cancelRequests.ts). */
  const engineStopped = useCallback(() => stopAll(book), [book]);

  /** A request that could not be sent (e.g. its mask did not upload): said where the outcome shows. */
  const fail = useCallback(
    (message: string) => {
      if (book.ctxs.size) setNotice(`Not queued. ${message}`);
      else book.clear({ ...IDLE, phase: 'error', message, finishedAt: Date.now() });
    },
    [book],
  );

  const dismiss = useCallback(() => {
    if (!book.ctxs.size) book.clear(IDLE);
  }, [book]);

  // after a reload: re-attach to the requests that were running or waiting
  useEffect(() => {
    for (const rec of loadPending()) book.add(rec, 'reattaching');
    book.persist();
    const first = book.ctxs.values().next().value;
    if (first) {
      book.shown = first;
      setView(first.view);
      void reattach(book, first, REATTACH_TRIES);
    }
    const onHide = () => cancelOnClose(book);
    window.addEventListener('pagehide', onHide);
    return () => {
      window.removeEventListener('pagehide', onHide);
      for (const ctx of book.ctxs.values()) ctx.abort.abort(); // leaving the page closes the streams (the engine's rules decide the rest)
    };
  }, [book]);

  return { view, ours, notice, generate, cancel, noteCancel, onQueue, dismiss, fail, engineStopped };
}
