'use client';
// The task of a request with input images (automatic by default: the engine's POST /resolve says which
// one runs) and the strength of one that repaints its input (img2img, inpaint; its default is the
// engine's too).
import { inputBounds } from './formChecks';
import { taskInfo, tasksOf } from './tasks';
import type { ArchInfo, FieldSpec } from './types';

const NEEDS_WORDS: Record<string, string> = { init_img: 'an input image', mask_img: 'a mask', ctrl_img: 'a reference image' };

interface TaskSelectProps {
  arch: ArchInfo;
  /** the form's `task` ('' = automatic) */
  chosen: string;
  /** the task the request runs, as the engine resolves it (null: not known) */
  task: string | null;
  /** what "Automatic" says when the engine resolves no task (the inputs fit none) */
  unresolved: string | null;
  onTask: (name: string) => void;
}

export function TaskSelect({ arch, chosen, task, unresolved, onTask }: TaskSelectProps) {
  const tasks = tasksOf(arch);
  const value = taskInfo(arch, chosen) ? chosen : '';
  const automatic = value ? 'Automatic' : task ? `Automatic (${task})` : unresolved ? `Automatic (${unresolved})` : 'Automatic';
  return (
    <label className="field">
      Task
      <select value={value} onChange={(e) => onTask(e.target.value)} aria-label="Task" data-testid="task-select" data-task={task ?? ''}>
        <option value="">{automatic}</option>
        {tasks.map((x) => (
          <option key={x.name} value={x.name}>
            {x.name}
            {x.needs.length ? ` (needs ${x.needs.map((n) => NEEDS_WORDS[n] ?? n).join(' and ')})` : ''}
          </option>
        ))}
      </select>
    </label>
  );
}

interface StrengthProps {
  task: string;
  /** the task's default (the engine's) */
  defaultStrength: number;
  /** the form's (null: the default) */
  chosen: number | null;
  /** `fields.strength`: the slider's bounds */
  spec: FieldSpec | undefined;
  onStrength: (v: number | null) => void;
}

const STRENGTH_STEP = 0.01;

/** The strength the request runs with (the task's default until moved), and a way back to that default. */
export function StrengthField({ task, defaultStrength, chosen, spec, onStrength }: StrengthProps) {
  const strength = chosen ?? defaultStrength;
  const { min, max } = spec ? inputBounds(spec, STRENGTH_STEP) : { min: STRENGTH_STEP, max: 1 };
  return (
    <div className="field">
      <span>
        Strength: how much of the input is repainted ({task} default {defaultStrength})
      </span>
      <div className="row">
        <input
          type="range"
          className="grow"
          min={min}
          max={max}
          step={STRENGTH_STEP}
          value={strength}
          onChange={(e) => onStrength(Number(e.target.value))}
          aria-label="Strength"
          data-testid="strength"
        />
        <span className="strength-value" data-testid="strength-value">
          {strength.toFixed(2)}
        </span>
        {chosen !== null && (
          <button type="button" className="link small" onClick={() => onStrength(null)}>
            default
          </button>
        )}
      </div>
    </div>
  );
}
