// "Each GPU set runs at most one job at a time": two jobs conflict when their sets share a device.
export function gpuSet(gpuIds: string): string[] {
  const s = gpuIds.trim().toLowerCase();
  return s === '' || s === 'cpu' ? ['cpu'] : s.split(',').map((x) => x.trim());
}

export function gpuSetsOverlap(a: string, b: string): boolean {
  const setB = new Set(gpuSet(b));
  return gpuSet(a).some((id) => setB.has(id));
}
