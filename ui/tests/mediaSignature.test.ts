// Uploads are told by their header where they are dropped: a PNG/JPEG/WebP image, an MP4/WebM video,
// a WAV/FLAC/MP3/Ogg audio file; a text file named x.png is refused with its name.
import { describe, expect, it } from 'vitest';
import { encodePng } from '@/components/generate/maskPng';
import { acceptedText, sniffMedia, uploadRefusal } from '@/components/generate/mediaSignature';

const bytes = (...parts: (string | number[])[]) =>
  Uint8Array.from(parts.flatMap((p) => (typeof p === 'string' ? [...p].map((c) => c.charCodeAt(0)) : p)));

describe('sniffMedia', () => {
  it('knows each format of a kind by its signature, and only for that kind', () => {
    expect(sniffMedia(bytes([0x89], 'PNG', [13, 10, 26, 10]), 'image')).toBe('PNG');
    expect(sniffMedia(bytes([0xff, 0xd8, 0xff, 0xe0]), 'image')).toBe('JPEG');
    expect(sniffMedia(bytes('RIFF', [1, 2, 3, 4], 'WEBPVP8 '), 'image')).toBe('WebP');
    expect(sniffMedia(bytes('RIFF', [1, 2, 3, 4], 'WAVEfmt '), 'image')).toBeNull();
    expect(sniffMedia(bytes('RIFF', [1, 2, 3, 4], 'WAVEfmt '), 'audio')).toBe('WAV');
    expect(sniffMedia(bytes([0, 0, 0, 0x20], 'ftypisom'), 'video')).toBe('MP4');
    expect(sniffMedia(bytes([0x1a, 0x45, 0xdf, 0xa3]), 'video')).toBe('WebM');
    expect(sniffMedia(bytes('fLaC'), 'audio')).toBe('FLAC');
    expect(sniffMedia(bytes('ID3', [4, 0]), 'audio')).toBe('MP3');
    expect(sniffMedia(bytes([0xff, 0xfb, 0x90]), 'audio')).toBe('MP3');
    expect(sniffMedia(bytes('OggS'), 'audio')).toBe('Ogg');
    expect(sniffMedia(bytes([0x89], 'PNG', [13, 10, 26, 10]), 'video')).toBeNull();
    // a PNG signature cut short is no PNG
    expect(sniffMedia(bytes([0x89], 'PNG'), 'image')).toBeNull();
  });
});

describe('uploadRefusal', () => {
  it('a real PNG passes; text named .png, an empty file, a PNG as audio are refused, naming the file', async () => {
    const png = await encodePng(2, 2, 1, new Uint8Array(4));
    expect(await uploadRefusal(new Blob([png as Uint8Array<ArrayBuffer>]), 'ok.png', 'image')).toBeNull();
    expect(await uploadRefusal(new Blob(['not an image at all']), 'x.png', 'image')).toBe('x.png is not a PNG/JPEG/WebP image.');
    expect(await uploadRefusal(new Blob([]), 'empty.png', 'image')).toBe('empty.png is not a PNG/JPEG/WebP image (it is empty).');
    expect(await uploadRefusal(new Blob([png as Uint8Array<ArrayBuffer>]), 'song.wav', 'audio')).toBe('song.wav is not a WAV/FLAC/MP3/Ogg audio.');
    expect(acceptedText('video')).toBe('MP4/WebM video');
  });
});
