import type { FileHandle } from "node:fs/promises";
import { CheckpointError } from "@kiln/contract";
import type { TensorByteSource } from "./tensor-byte-source.js";

// Node caps one read or write at about 2 GiB; larger spans are done in pieces.
const MAX_IO_BYTES = 1 << 30;

/** Writes all of `bytes` at `position`, however many calls it takes. */
export async function writeFully(file: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  let done = 0;
  while (done < bytes.byteLength) {
    const length = Math.min(bytes.byteLength - done, MAX_IO_BYTES);
    const { bytesWritten } = await file.write(bytes, done, length, position + done);
    done += bytesWritten;
  }
}

/** Fills `target` from `position`; a file that ends first is reported as truncated. */
export async function readFully(file: FileHandle, target: Uint8Array, position: number, fileName: string): Promise<void> {
  let done = 0;
  while (done < target.byteLength) {
    const length = Math.min(target.byteLength - done, MAX_IO_BYTES);
    const { bytesRead } = await file.read(target, done, length, position + done);
    if (bytesRead === 0) {
      throw new CheckpointError(`file ended at byte ${position + done}, before the ${target.byteLength} bytes expected at ${position}`, {
        where: fileName,
        hint: "The file was truncated or replaced while it was being read; read it again, or load an earlier checkpoint.",
      });
    }
    done += bytesRead;
  }
}

/** Bytes of the buffer a SequentialFileWriter stages its writes in, unless told otherwise. */
export const WRITE_BUFFER_BYTES = 4 << 20;

/**
 * Collects small pieces into one buffer so that a file of many small tensors
 * takes few write calls; large pieces in memory go straight to the file, and
 * streamed ones (appendFrom) pass through the buffer a buffer-full at a time.
 */
export class SequentialFileWriter {
  private readonly staging: Uint8Array;
  private used = 0;
  private position = 0;

  /** `stagingBytes` is rounded up to a multiple of 8 (streamed pieces then stay aligned to their elements). */
  constructor(
    private readonly file: FileHandle,
    stagingBytes = WRITE_BUFFER_BYTES,
  ) {
    this.staging = new Uint8Array(Math.max(8, Math.ceil(stagingBytes / 8) * 8));
  }

  /** Appends every byte of `source`, read into the staging buffer piece by piece: nothing larger is allocated. */
  async appendFrom(source: TensorByteSource): Promise<void> {
    let done = 0;
    while (done < source.byteLength) {
      if (this.used === this.staging.byteLength) await this.flush();
      const length = Math.min(source.byteLength - done, this.staging.byteLength - this.used);
      await source.read(this.staging.subarray(this.used, this.used + length), done);
      this.used += length;
      done += length;
    }
  }

  async append(bytes: Uint8Array): Promise<void> {
    if (this.used + bytes.byteLength > this.staging.byteLength) await this.flush();
    if (bytes.byteLength >= this.staging.byteLength) {
      await writeFully(this.file, bytes, this.position);
      this.position += bytes.byteLength;
      return;
    }
    this.staging.set(bytes, this.used);
    this.used += bytes.byteLength;
  }

  async flush(): Promise<void> {
    if (this.used === 0) return;
    await writeFully(this.file, this.staging.subarray(0, this.used), this.position);
    this.position += this.used;
    this.used = 0;
  }
}
