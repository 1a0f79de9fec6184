// Where everything goes in the grid's PNG: X labels in a band on top, Y labels in a column on the
// left, one cell box per image (the largest image's size). Pure: text is measured by a function the
// caller passes (a canvas's measureText in the browser).

export type Measure = (text: string, fontPx: number) => number;

export interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface GridLayout {
  width: number;
  height: number;
  fontPx: number;
  /** row by row: y * cols + x */
  cells: Box[];
  /** each label's box, its text already cut to fit ('' = none) */
  xLabels: { box: Box; text: string }[];
  yLabels: { box: Box; text: string }[];
}

/** `text` cut with an ellipsis so it measures at most `max` px. */
export function fitText(text: string, max: number, fontPx: number, measure: Measure): string {
  if (measure(text, fontPx) <= max) return text;
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (measure(`${text.slice(0, mid)}…`, fontPx) <= max) lo = mid;
    else hi = mid - 1;
  }
  return lo ? `${text.slice(0, lo)}…` : '';
}

export function gridLayout(opts: { cellW: number; cellH: number; xLabels: string[]; yLabels: string[]; measure: Measure }): GridLayout {
  const { cellW, cellH, xLabels, yLabels, measure } = opts;
  const cols = Math.max(1, xLabels.length);
  const rows = Math.max(1, yLabels.length);
  const fontPx = Math.min(48, Math.max(14, Math.round(cellW / 12)));
  const pad = Math.round(fontPx / 2);
  const gap = Math.max(2, Math.round(cellW / 64));
  const top = xLabels.some(Boolean) ? Math.round(fontPx * 1.3) + 2 * pad : 0;
  const widest = Math.max(0, ...yLabels.map((t) => measure(t, fontPx)));
  const left = yLabels.some(Boolean) ? Math.round(Math.min(Math.max(widest, cellW / 2), 2 * Math.max(cellW, 120))) + 2 * pad : 0;
  const cells: Box[] = [];
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) cells.push({ x: left + c * (cellW + gap), y: top + r * (cellH + gap), w: cellW, h: cellH });
  }
  const label = (text: string, box: Box) => ({ box, text: fitText(text, box.w - 2 * pad, fontPx, measure) });
  return {
    width: left + cols * cellW + (cols - 1) * gap,
    height: top + rows * cellH + (rows - 1) * gap,
    fontPx,
    cells,
    xLabels: xLabels.map((t, c) => label(t, { x: left + c * (cellW + gap), y: 0, w: cellW, h: top })),
    yLabels: yLabels.map((t, r) => label(t, { x: 0, y: top + r * (cellH + gap), w: left, h: cellH })),
  };
}
