// Undo/redo for the mask painter: each step (a stroke, Clear, Invert) keeps the mask as it was
// before it; undo and redo swap the current mask with a kept one (pure, generic over the snapshot).

/** How many steps back undo reaches: a 1024² mask is 1 MiB a step. */
export const MASK_HISTORY_STEPS = 40;

export class UndoStack<T> {
  private past: T[] = [];
  private future: T[] = [];
  constructor(private readonly limit = MASK_HISTORY_STEPS) {}

  /** A step is about to change `before`: keep it; a new step ends the redo branch. */
  push(before: T): void {
    this.past.push(before);
    if (this.past.length > this.limit) this.past.shift();
    this.future = [];
  }

  /** The state to restore, given the current one (kept for redo); null when there is nothing to undo. */
  undo(current: T): T | null {
    const prev = this.past.pop();
    if (prev === undefined) return null;
    this.future.push(current);
    return prev;
  }

  redo(current: T): T | null {
    const next = this.future.pop();
    if (next === undefined) return null;
    this.past.push(current);
    return next;
  }

  /** Forget every step (a stored mask drawn anew is the new start). */
  reset(): void {
    this.past = [];
    this.future = [];
  }

  get canUndo(): boolean {
    return this.past.length > 0;
  }

  get canRedo(): boolean {
    return this.future.length > 0;
  }
}

/** Which history key a keydown is: Ctrl/Cmd+Z undo, Ctrl/Cmd+Shift+Z or Ctrl/Cmd+Y redo, else null. */
export function historyKey(e: { key: string; ctrlKey: boolean; metaKey: boolean; shiftKey: boolean; altKey: boolean }): 'undo' | 'redo' | null {
  if (!(e.ctrlKey || e.metaKey) || e.altKey) return null;
  const key = e.key.toLowerCase();
  if (key === 'z') return e.shiftKey ? 'redo' : 'undo';
  if (key === 'y' && !e.shiftKey) return 'redo';
  return null;
}
