// What a generation's model was, as one comparable key: the history's model filter uses it on
// the server (stored per row) and in the page (does a new result match the filter shown?).

export interface ModelIdentity {
  arch: string;
  /** the profile name when the model came from one, else the weights' name or path */
  source: string;
  variant: string | null;
  /** "qfloat8", "te qint8", "qfloat8, te qint8"; null when nothing is quantized */
  quantization: string | null;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

export function modelIdentity(model: Record<string, unknown>): ModelIdentity {
  const quant = [model.quantize === true ? str(model.qtype) || 'quantized' : '', model.quantize_te === true ? `te ${str(model.qtype_te) || 'quantized'}` : '']
    .filter(Boolean)
    .join(', ');
  return {
    arch: str(model.arch),
    source: str(model.profile) ? `profile ${str(model.profile)}` : str(model.name_or_path),
    variant: str(model.variant) || null,
    quantization: quant || null,
  };
}

/** "zimage · tiny:zimage · turbo · qfloat8": the filter's value and the label a person reads. LoRAs are not part of it. */
export function modelKey(model: Record<string, unknown>): string {
  const id = modelIdentity(model);
  return [id.arch, id.source, id.variant, id.quantization].filter(Boolean).join(' · ');
}
