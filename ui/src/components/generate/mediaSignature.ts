// What an upload is by its first bytes (its signature), not by its name or the type the browser
// guesses from the name: an input is refused where it is dropped, not later at Generate. The same
// signatures as the engine's toolkit/media.py `sniff_format` (pure, but for reading a Blob's head).

export type MediaKind = 'image' | 'video' | 'audio';

const ascii = (b: Uint8Array, at: number, text: string) => [...text].every((ch, i) => b[at + i] === ch.charCodeAt(0));

/** Each format an input of a kind may be, by its signature. */
const SIGNATURES: Record<MediaKind, { name: string; test: (b: Uint8Array) => boolean }[]> = {
  image: [
    { name: 'PNG', test: (b) => [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a].every((v, i) => b[i] === v) },
    { name: 'JPEG', test: (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff },
    { name: 'WebP', test: (b) => ascii(b, 0, 'RIFF') && ascii(b, 8, 'WEBP') },
  ],
  video: [
    { name: 'MP4', test: (b) => ascii(b, 4, 'ftyp') },
    { name: 'WebM', test: (b) => [0x1a, 0x45, 0xdf, 0xa3].every((v, i) => b[i] === v) },
  ],
  audio: [
    { name: 'WAV', test: (b) => ascii(b, 0, 'RIFF') && ascii(b, 8, 'WAVE') },
    { name: 'FLAC', test: (b) => ascii(b, 0, 'fLaC') },
    { name: 'MP3', test: (b) => ascii(b, 0, 'ID3') || (b[0] === 0xff && (b[1] & 0xe0) === 0xe0) },
    { name: 'Ogg', test: (b) => ascii(b, 0, 'OggS') },
  ],
};

/** How many leading bytes every signature above needs. */
export const SIGNATURE_BYTES = 12;

/** The format's name ("PNG") when the bytes start as one of `kind`'s formats, else null. */
export function sniffMedia(head: Uint8Array, kind: MediaKind): string | null {
  return SIGNATURES[kind].find((s) => s.test(head))?.name ?? null;
}

/** "PNG/JPEG/WebP image": what a kind's input may be, for the refusal. */
export function acceptedText(kind: MediaKind): string {
  return `${SIGNATURES[kind].map((s) => s.name).join('/')} ${kind}`;
}

/** Why a file cannot be a `kind` input ("x.png is not a PNG/JPEG/WebP image"), or null when its header fits. */
export async function uploadRefusal(file: Blob, name: string, kind: MediaKind): Promise<string | null> {
  const head = new Uint8Array(await file.slice(0, SIGNATURE_BYTES).arrayBuffer());
  if (sniffMedia(head, kind)) return null;
  return `${name || 'The file'} is not a ${acceptedText(kind)}${head.length ? '' : ' (it is empty)'}.`;
}
