// An axis's typed value list: comma-separated (double quotes keep a comma inside a value, as in
// A1111's X/Y/Z plot), numbers checked, and numeric ranges expanded: "1-4" -> 1,2,3,4 and
// "10-30 (+10)" -> 10,20,30 (a negative step counts down).

/** The most values one axis may expand to; the grid as a whole has its own bound (MAX_CELLS). */
export const MAX_AXIS_VALUES = 64;

export type Parsed<T> = { values: T[] } | { error: string };

/** Split on commas outside double quotes; each value trimmed, empty ones dropped (a quoted "" stays). */
export function splitValues(text: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  let wasQuoted = false;
  for (const ch of text) {
    if (ch === '"') {
      quoted = !quoted;
      wasQuoted = true;
    } else if (ch === ',' && !quoted) {
      push();
    } else cur += ch;
  }
  push();
  return out;

  function push() {
    const v = cur.trim();
    if (v || wasQuoted) out.push(v);
    cur = '';
    wasQuoted = false;
  }
}

const NUM = '[+-]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)';
const RANGE = new RegExp(`^(${NUM})\\s*-\\s*(${NUM})(?:\\s*\\(\\s*(${NUM})\\s*\\))?$`);

/** Decimal places of a number as written, so 0.1 steps do not drift (0.30000000000000004). */
const decimals = (s: string) => (s.includes('.') ? s.split('.')[1].length : 0);

export interface NumberRule {
  integer: boolean;
  min: number;
  max?: number;
}

/** One axis's numbers, ranges expanded; `name` is said in every message ("steps: …"). */
export function parseNumbers(name: string, text: string, rule: NumberRule): Parsed<number> {
  const items = splitValues(text);
  if (!items.length) return { error: `${name}: give at least one value (e.g. 1, 2, 3 or 1-4).` };
  const values: number[] = [];
  for (const item of items) {
    const range = RANGE.exec(item);
    const expanded = range ? expandRange(name, range[1], range[2], range[3]) : single(item);
    if ('error' in expanded) return expanded;
    for (const v of expanded.values) {
      const bad = check(name, v, rule);
      if (bad) return { error: bad };
      values.push(v);
      if (values.length > MAX_AXIS_VALUES) return { error: `${name}: more than ${MAX_AXIS_VALUES} values; use a larger step.` };
    }
  }
  return { values };

  function single(item: string): Parsed<number> {
    if (!new RegExp(`^${NUM}$`).test(item)) return { error: `${name}: ${JSON.stringify(item)} is not a number (or a range like 1-4 or 10-30 (+10)).` };
    return { values: [Number(item)] };
  }
}

function expandRange(name: string, from: string, to: string, step: string | undefined): Parsed<number> {
  const a = Number(from);
  const b = Number(to);
  const s = step === undefined ? (b >= a ? 1 : -1) : Number(step);
  if (s === 0 || Math.sign(b - a) * Math.sign(s) < 0) {
    return { error: `${name}: the range ${from}-${to} never reaches ${to} with step ${s}.` };
  }
  const places = Math.max(decimals(from), decimals(step ?? ''));
  const out: number[] = [];
  for (let i = 0; ; i++) {
    const v = Number((a + i * s).toFixed(places));
    if ((s > 0 && v > b + 1e-9) || (s < 0 && v < b - 1e-9)) break;
    out.push(v);
    if (out.length > MAX_AXIS_VALUES) return { error: `${name}: the range ${from}-${to} makes more than ${MAX_AXIS_VALUES} values; use a larger step.` };
  }
  return { values: out };
}

function check(name: string, v: number, rule: NumberRule): string | null {
  if (!Number.isFinite(v)) return `${name}: ${v} is not a number.`;
  if (rule.integer && !Number.isInteger(v)) return `${name}: ${v} is not a whole number.`;
  if (v < rule.min) return `${name}: ${v} is below ${rule.min}.`;
  if (rule.max !== undefined && v > rule.max) return `${name}: ${v} is above ${rule.max}.`;
  return null;
}
