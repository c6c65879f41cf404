import { createReadStream, type ReadStream } from "node:fs";
import { open } from "node:fs/promises";
import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { createGunzip } from "node:zlib";
import { DataError } from "@kiln/contract";
import { type FileErrorContext, fileReadError } from "../fs/file-errors.js";
import { type Compression, type FileSignature, SIGNATURE_BYTES, recognizeSignature } from "./file-signature.js";
import { TextCheck } from "./text-check.js";

const READ_CHUNK_BYTES = 1 << 20;
/** How much of a file's (decompressed) start notText() looks at. */
export const SNIFF_BYTES = 1 << 16;
const INPUT_FILE: FileErrorContext = { what: "input file", error: DataError };

/** What to do with a file a decompressor cannot read, by compression. */
const DECOMPRESS_HINTS: Record<Compression, string> = {
  gzip: "Check it with `gzip -t FILE`; if it is damaged, download or compress it again.",
  zstd: "Check it with `zstd -t FILE`; if it is damaged, download or compress it again. (A file compressed with --long or --ultra may need a window kiln's reader lacks: decompress it with `zstd -d FILE` and pass the text.)",
  xz: "Check it with `xz -t FILE`; if it is damaged, download or compress it again.",
};

/**
 * One input of `kiln prepare`: a text file, plain or compressed (gzip, zstd or
 * xz, told by its first bytes, whatever its name), read as a stream of its
 * decompressed bytes.
 */
export class TextInputFile {
  private raw: ReadStream | undefined;

  private constructor(
    readonly file: string,
    /** What the file's first bytes say it is. */
    readonly signature: FileSignature,
  ) {}

  static async open(file: string): Promise<TextInputFile> {
    const head = new Uint8Array(SIGNATURE_BYTES);
    let length: number;
    try {
      const handle = await open(file, "r");
      try {
        ({ bytesRead: length } = await handle.read(head, 0, head.byteLength, 0));
      } finally {
        await handle.close();
      }
    } catch (err) {
      throw fileReadError(err, file, INPUT_FILE);
    }
    return new TextInputFile(file, recognizeSignature(head.subarray(0, length)));
  }

  get compression(): Compression | undefined {
    return this.signature !== undefined && "compression" in this.signature ? this.signature.compression : undefined;
  }

  /** Bytes of the file (compressed, where it is) read so far by the current chunks(). */
  get rawBytesRead(): number {
    return this.raw?.bytesRead ?? 0;
  }

  /**
   * The file's bytes, decompressed, in chunks. Read errors are DataErrors naming the
   * file; so is compressed data that is damaged or cut short.
   */
  async *chunks(): AsyncGenerator<Uint8Array> {
    const raw = createReadStream(this.file, { highWaterMark: READ_CHUNK_BYTES });
    this.raw = raw;
    let readError: unknown;
    raw.on("error", (err) => {
      readError = err;
    });
    const compression = this.compression;
    try {
      if (compression === undefined) yield* raw as AsyncIterable<Buffer>;
      else if (compression === "gzip") yield* gunzip(raw);
      else if (compression === "zstd") yield* unzstd(raw);
      else yield* unxz(raw);
    } catch (err) {
      if (readError !== undefined || compression === undefined) throw fileReadError(readError ?? err, this.file, INPUT_FILE);
      throw new DataError(`input file is ${compression}-compressed but cannot be decompressed: ${decompressMessage(err)}`, {
        where: this.file,
        hint: DECOMPRESS_HINTS[compression],
        cause: err,
      });
    } finally {
      raw.destroy();
    }
  }

  /**
   * What the file is when it is not text, as a noun phrase ("a PNG image", "a gzip-compressed
   * file holding binary data (...)"), from its first bytes and its first SNIFF_BYTES of
   * (decompressed) content; undefined when that looks like UTF-8 text.
   */
  async notText(): Promise<string | undefined> {
    if (this.signature !== undefined && "binary" in this.signature) return this.signature.binary;
    const pieces: Uint8Array[] = [];
    let length = 0;
    for await (const chunk of this.chunks()) {
      pieces.push(chunk);
      length += chunk.byteLength;
      if (length >= SNIFF_BYTES) break;
    }
    const sample = Buffer.concat(pieces).subarray(0, SNIFF_BYTES);
    const inner = this.compression === undefined ? undefined : recognizeSignature(sample.subarray(0, SIGNATURE_BYTES));
    const check = new TextCheck();
    check.see(new TextDecoder("utf-8").decode(sample, { stream: length > SNIFF_BYTES }));
    const problem = inner !== undefined ? ("binary" in inner ? inner.binary : `${inner.compression}-compressed data`) : check.problem(true);
    if (problem === undefined) return undefined;
    return this.compression === undefined ? problem : `a ${this.compression}-compressed file holding ${problem}`;
  }
}

async function* gunzip(raw: ReadStream): AsyncGenerator<Uint8Array> {
  const gz = createGunzip();
  raw.on("error", (err) => gz.destroy(err));
  raw.pipe(gz);
  try {
    yield* gz as AsyncIterable<Buffer>;
  } finally {
    gz.destroy();
  }
}

async function* unzstd(raw: ReadStream): AsyncGenerator<Uint8Array> {
  const { Decompress } = await import("fzstd");
  let out: Uint8Array[] = [];
  // fzstd may hand out views of its window: copy each block before the next push.
  const decompressor = new Decompress((block) => {
    if (block.byteLength > 0) out.push(block.slice());
  });
  for await (const chunk of raw as AsyncIterable<Buffer>) {
    decompressor.push(chunk);
    const ready = out;
    out = [];
    yield* ready;
  }
  decompressor.push(new Uint8Array(0), true);
  yield* out;
}

async function* unxz(raw: ReadStream): AsyncGenerator<Uint8Array> {
  const { XzReadableStream } = (await import("xz-decompress")).default;
  const web = Readable.toWeb(raw) as unknown as ReadableStream<Uint8Array>;
  const stream = new XzReadableStream(web) as unknown as WebReadableStream<Uint8Array>;
  yield* stream;
}

function decompressMessage(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  // xz-decompress reports xz-embedded's return codes (xz.h: XZ_FORMAT_ERROR 5 ... XZ_BUF_ERROR 8).
  const xz = /get_next_output failed with error code (\d+)/.exec(message);
  if (xz) return { "5": "not xz data", "6": "options it does not support", "7": "the data is damaged", "8": "the data is cut short" }[xz[1]] ?? message;
  if (/unexpected end of file|unexpected EOF/i.test(message)) return "the data is cut short";
  return message;
}
