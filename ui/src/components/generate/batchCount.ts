// Batch count (Forge's "Batch count"): how many requests one Generate sends, apart from the batch size
// (how many images one request makes in one pass). Pure: the count's request bodies and their seeds.

export const MAX_BATCH_COUNT = 100;

/** A count as typed, or why it is not one (null: fine). */
export function countProblem(count: number): string | null {
  return Number.isInteger(count) && count >= 1 && count <= MAX_BATCH_COUNT ? null : `Batch count must be a whole number from 1 to ${MAX_BATCH_COUNT}.`;
}

interface Body {
  request_id: string;
  sample: Record<string, unknown>;
}

/**
 * The count's requests, each its own request id and seed. A seed set: request i starts at
 * seed + i × batch size (a request's images are seed + j, so no two images share one); -1 (random)
 * stays -1, so the engine draws each request's own.
 */
export function countBodies<B extends Body>(body: B, count: number, newId: () => string): B[] {
  const seed = Number(body.sample.seed ?? -1);
  const size = Math.max(1, Number(body.sample.batch_size ?? 1) || 1);
  return Array.from({ length: count }, (_, i) =>
    i === 0 ? body : { ...body, request_id: newId(), sample: { ...body.sample, seed: seed < 0 ? -1 : seed + i * size } },
  );
}
