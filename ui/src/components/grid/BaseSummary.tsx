'use client';
// The settings every cell starts from: the Generate page's forms, shown, with a link to edit them there.
import Link from 'next/link';
import { loraLabel } from '@/components/generate/loras';
import type { ModelForm, SampleForm } from '@/components/generate/types';

export default function BaseSummary({ model, sample, jobId }: { model: ModelForm; sample: SampleForm; jobId: string | null }) {
  const rows: [string, string][] = [
    ['Model', model.profile ? `profile ${model.profile}` : `${model.arch}: ${model.name_or_path || '(its default)'}`],
    ['Prompt', sample.prompt || '(empty)'],
    ['Size', `${sample.width}×${sample.height}`],
    ['Steps', String(sample.num_inference_steps)],
    ['Guidance', String(sample.guidance_scale)],
    ['Seed', sample.seed === -1 ? 'random (-1)' : String(sample.seed)],
    ['Sampler', sample.sampler || 'Default'],
    ['LoRAs', model.loras.length ? model.loras.map(loraLabel).join(', ') : 'none'],
  ];
  return (
    <section className="card" aria-label="Base settings" data-testid="grid-base">
      <h3>Base settings</h3>
      <dl className="grid-base">
        {rows.map(([k, v]) => (
          <div key={k}>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </div>
        ))}
      </dl>
      <p className="small muted">
        Every cell uses these (one image each), with its X and Y values in place.{' '}
        <Link href={jobId ? `/generate?job=${encodeURIComponent(jobId)}` : '/generate'} data-testid="grid-edit-base">
          Edit them on the Generate page
        </Link>
      </p>
    </section>
  );
}
