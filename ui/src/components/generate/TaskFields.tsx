'use client';
// The task of a request with input images (automatic by default: the form shows which one runs) and
// the strength of one that repaints its input (img2img, inpaint).
import { taskInfo, tasksOf } from './tasks';
import type { ArchInfo, TaskInfo } from './types';

const NEEDS_WORDS: Record<string, string> = { init_img: 'an input image', mask_img: 'a mask', ctrl_img: 'a reference image' };

interface TaskSelectProps {
  arch: ArchInfo;
  /** the form's `task` ('' = automatic) */
  chosen: string;
  /** the task the request runs */
  task: string | null;
  /** the one automatic runs */
  inferred: string | null;
  onTask: (name: string) => void;
}

export function TaskSelect({ arch, chosen, task, inferred, onTask }: TaskSelectProps) {
  const tasks = tasksOf(arch);
  return (
    <label className="field">
      Task
      <select value={taskInfo(arch, chosen) ? chosen : ''} onChange={(e) => onTask(e.target.value)} aria-label="Task" data-testid="task-select" data-task={task ?? ''}>
        <option value="">Automatic ({inferred ?? 'no task fits these inputs'})</option>
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

/** The strength the request runs with (the task's default until moved), and a way back to that default. */
export function StrengthField({ task, strength, chosen, onStrength }: { task: TaskInfo; strength: number; chosen: number | null; onStrength: (v: number | null) => void }) {
  return (
    <div className="field">
      <span>
        Strength: how much of the input is repainted ({task.name} default {task.strength})
      </span>
      <div className="row">
        <input
          type="range"
          className="grow"
          min={0.01}
          max={1}
          step={0.01}
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
