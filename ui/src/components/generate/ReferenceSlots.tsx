'use client';
// The reference images of an edit task (ctrl_img, ctrl_img_1..3, as many slots as it takes): one more
// slot shows once the previous is filled; clearing one shifts the later ones down.
import ImageDrop from './ImageDrop';
import { withoutReference } from './tasks';
import type { ArchInfo, SampleInput, SampleForm } from './types';

interface Props {
  arch: ArchInfo;
  slots: SampleInput[];
  images: SampleForm['images'];
  job: { id: string; name: string } | null;
  onImages: (images: SampleForm['images']) => void;
}

export default function ReferenceSlots({ arch, slots, images, job, onImages }: Props) {
  return (
    <>
      {slots.map((slot, i) => {
        if (i > 0 && !images[slots[i - 1]]) return null; // one more slot once the previous is filled
        const label =
          i === 0
            ? arch.needs_ctrl_img
              ? 'Reference image (required)'
              : 'Reference image (optional: the prompt edits it)'
            : `Reference image ${i + 1} (optional)`;
        return (
          <ImageDrop
            key={slot}
            label={label}
            testId={`ref-drop-${i}`}
            assetId={images[slot] ?? null}
            job={job}
            onChange={(id) => onImages(id ? { ...images, [slot]: id } : withoutReference(images, slots, slot))}
          />
        );
      })}
    </>
  );
}
