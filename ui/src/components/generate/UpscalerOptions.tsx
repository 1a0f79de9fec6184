// The <option>s of an upscaler picker (GET /upscalers' names; an upscale model marked as one): the Hires
// section's and the Upscale chooser's.
import type { UpscalerInfo } from './controlHires';

export function UpscalerOptions({ names }: { names: UpscalerInfo[] }) {
  return (
    <>
      {names.map((u) => (
        <option key={u.name} value={u.name}>
          {u.name}
          {u.kind === 'model' ? ' (model)' : ''}
        </option>
      ))}
    </>
  );
}
