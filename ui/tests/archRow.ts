// An arch row as GET /models serves it (ArchInfo), for the form tests: its resolved `sample` is the
// engine's for these defaults; `over` sets what a test is about.
import type { ArchInfo } from '@/components/generate/types';

export function archRow(name: string, over: Partial<ArchInfo> = {}, defaults: Partial<ArchInfo['defaults']> = {}): ArchInfo {
  const d = { width: 64, height: 64, num_inference_steps: 4, guidance_scale: 7.5, num_frames: 1, fps: 0, duration: 0, output_ext: 'png', ...defaults };
  return {
    name,
    modality: 'image',
    default_name_or_path: `org/${name}`,
    defaults: d,
    size_divisor: 8,
    needs_ctrl_img: false,
    uses_negative_prompt: true,
    sample_extras: {},
    description: '',
    output_exts: ['png'],
    preview: { family: null, layout: 'BCHW', rgb_factors: null, rgb_bias: null },
    sample: { prompt: '', negative_prompt: '', seed: -1, ...d },
    variant_samples: {},
    ...over,
  };
}
