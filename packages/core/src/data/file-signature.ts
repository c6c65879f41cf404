/**
 * What a file's first bytes say it is: a compression kiln reads through
 * (gzip, zstd, xz), a known binary format, or nothing in particular (then its
 * bytes decide: see TextCheck). Magic numbers from each format's specification.
 */
export type Compression = "gzip" | "zstd" | "xz";

/** `binary` names the format as a noun phrase: "a PNG image". */
export type FileSignature = { compression: Compression } | { binary: string } | undefined;

/** Bytes of a file's start that recognizeSignature looks at (the tar magic sits at 257). */
export const SIGNATURE_BYTES = 264;

interface Magic {
  at: number;
  bytes: readonly number[];
}

const ascii = (s: string): number[] => [...s].map((c) => c.charCodeAt(0));

const COMPRESSIONS: readonly { compression: Compression; magic: Magic }[] = [
  { compression: "gzip", magic: { at: 0, bytes: [0x1f, 0x8b] } }, // RFC 1952
  { compression: "zstd", magic: { at: 0, bytes: [0x28, 0xb5, 0x2f, 0xfd] } }, // RFC 8878, 0xFD2FB528 little-endian
  { compression: "xz", magic: { at: 0, bytes: [0xfd, ...ascii("7zXZ"), 0x00] } }, // .xz file format 1.2.1
];

const BINARY_FORMATS: readonly { name: string; magic: readonly Magic[] }[] = [
  { name: "a PNG image", magic: [{ at: 0, bytes: [0x89, ...ascii("PNG\r\n"), 0x1a, 0x0a] }] },
  { name: "a JPEG image", magic: [{ at: 0, bytes: [0xff, 0xd8, 0xff] }] },
  { name: "a GIF image", magic: [{ at: 0, bytes: ascii("GIF87a") }] },
  { name: "a GIF image", magic: [{ at: 0, bytes: ascii("GIF89a") }] },
  { name: "a WebP image", magic: [{ at: 0, bytes: ascii("RIFF") }, { at: 8, bytes: ascii("WEBP") }] },
  { name: "a TIFF image", magic: [{ at: 0, bytes: [0x49, 0x49, 0x2a, 0x00] }] },
  { name: "a TIFF image", magic: [{ at: 0, bytes: [0x4d, 0x4d, 0x00, 0x2a] }] },
  { name: "an ICO image", magic: [{ at: 0, bytes: [0x00, 0x00, 0x01, 0x00] }] },
  { name: "a HEIF/AVIF image", magic: [{ at: 4, bytes: ascii("ftypheic") }] },
  { name: "a HEIF/AVIF image", magic: [{ at: 4, bytes: ascii("ftypavif") }] },
  { name: "a PDF document", magic: [{ at: 0, bytes: ascii("%PDF-") }] },
  { name: "a zip archive (or .docx, .xlsx, .epub, .jar)", magic: [{ at: 0, bytes: [0x50, 0x4b, 0x03, 0x04] }] },
  { name: "a zip archive (or .docx, .xlsx, .epub, .jar)", magic: [{ at: 0, bytes: [0x50, 0x4b, 0x05, 0x06] }] },
  { name: "a tar archive", magic: [{ at: 257, bytes: ascii("ustar") }] },
  { name: "a bzip2-compressed file", magic: [{ at: 0, bytes: ascii("BZh") }, { at: 4, bytes: [0x31, 0x41, 0x59, 0x26, 0x53, 0x59] }] },
  { name: "a 7-Zip archive", magic: [{ at: 0, bytes: [0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c] }] },
  { name: "a RAR archive", magic: [{ at: 0, bytes: [...ascii("Rar!"), 0x1a, 0x07] }] },
  { name: "an ELF executable", magic: [{ at: 0, bytes: [0x7f, ...ascii("ELF")] }] },
  { name: "a WebAssembly module", magic: [{ at: 0, bytes: [0x00, ...ascii("asm")] }] },
  { name: "an SQLite database", magic: [{ at: 0, bytes: [...ascii("SQLite format 3"), 0x00] }] },
  { name: "a Parquet file", magic: [{ at: 0, bytes: ascii("PAR1") }] },
  { name: "a NumPy array (.npy)", magic: [{ at: 0, bytes: [0x93, ...ascii("NUMPY")] }] },
  { name: "an MP3 file", magic: [{ at: 0, bytes: ascii("ID3") }, { at: 4, bytes: [0x00] }] }, // ID3v2 tag: "ID3", version, revision 0
  { name: "an Ogg file", magic: [{ at: 0, bytes: ascii("OggS") }] },
  { name: "a FLAC file", magic: [{ at: 0, bytes: ascii("fLaC") }] },
  { name: "a WAV file", magic: [{ at: 0, bytes: ascii("RIFF") }, { at: 8, bytes: ascii("WAVE") }] },
  { name: "an MP4 video", magic: [{ at: 4, bytes: ascii("ftyp") }] },
  { name: "an llm.c token shard", magic: [{ at: 0, bytes: [0x88, 0xd8, 0x34, 0x01] }] }, // 20240520 little-endian
  { name: "an llm.c token shard", magic: [{ at: 0, bytes: [0xa1, 0xd9, 0x34, 0x01] }] }, // 20240801 little-endian
];

function matches(head: Uint8Array, magic: Magic): boolean {
  if (head.byteLength < magic.at + magic.bytes.length) return false;
  return magic.bytes.every((b, i) => head[magic.at + i] === b);
}

/** The compression or binary format `head` (a file's first SIGNATURE_BYTES or fewer) starts with, if any. */
export function recognizeSignature(head: Uint8Array): FileSignature {
  for (const c of COMPRESSIONS) if (matches(head, c.magic)) return { compression: c.compression };
  for (const f of BINARY_FORMATS) if (f.magic.every((m) => matches(head, m))) return { binary: f.name };
  if (matches(head, { at: 0, bytes: [0xff, 0xfe] }) || matches(head, { at: 0, bytes: [0xfe, 0xff] })) {
    return { binary: "UTF-16 text (it starts with a UTF-16 byte-order mark; kiln reads UTF-8, which iconv -f UTF-16 -t UTF-8 converts it to)" };
  }
  return undefined;
}
