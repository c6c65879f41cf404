import { open, type FileHandle } from "node:fs/promises";
import { CheckpointError } from "@kiln/contract";
import { readFully } from "./file-io.js";
import type { SafetensorsTensor } from "./safetensors-codec.js";
import { openError } from "./safetensors-file.js";
import {
  SAFETENSORS_LENGTH_BYTES,
  parseSafetensorsHeader,
  readSafetensorsHeaderLength,
  type SafetensorsHeader,
  type SafetensorsTensorInfo,
} from "./safetensors-header.js";

/**
 * An open safetensors file whose header has been read and checked; tensor data
 * are read on request with positioned reads, so a large file is never held whole.
 * Call close() when done.
 */
export class SafetensorsReader {
  private closed = false;

  private constructor(
    readonly path: string,
    readonly header: SafetensorsHeader,
    private readonly file: FileHandle,
  ) {}

  /** Opens `path` and reads only its length field and header. */
  static async open(path: string): Promise<SafetensorsReader> {
    let file: FileHandle;
    try {
      file = await open(path, "r");
    } catch (err) {
      throw openError(err, path);
    }
    try {
      const fileSize = (await file.stat()).size;
      const prefix = new Uint8Array(SAFETENSORS_LENGTH_BYTES);
      if (fileSize >= SAFETENSORS_LENGTH_BYTES) await readFully(file, prefix, 0, path);
      const headerLength = readSafetensorsHeaderLength(prefix, { fileName: path, fileSize });
      const head = new Uint8Array(SAFETENSORS_LENGTH_BYTES + headerLength);
      head.set(prefix);
      await readFully(file, head.subarray(SAFETENSORS_LENGTH_BYTES), SAFETENSORS_LENGTH_BYTES, path);
      return new SafetensorsReader(path, parseSafetensorsHeader(head, { fileName: path, fileSize }), file);
    } catch (err) {
      await file.close().catch(() => undefined);
      if (err instanceof CheckpointError) throw err;
      throw openError(err, path);
    }
  }

  get metadata(): Record<string, string> {
    return this.header.metadata;
  }

  /** Tensor names, in the order their data lies in the file. */
  get names(): string[] {
    return [...this.header.tensors.keys()];
  }

  has(name: string): boolean {
    return this.header.tensors.has(name);
  }

  /** dtype, shape and byte range of a tensor; throws a CheckpointError if there is none by that name. */
  info(name: string): SafetensorsTensorInfo {
    const info = this.header.tensors.get(name);
    if (info === undefined) {
      const some = this.names.slice(0, 5).map((n) => JSON.stringify(n));
      throw new CheckpointError(`no tensor named ${JSON.stringify(name)}`, {
        where: this.path,
        hint: `The file has ${this.header.tensors.size} tensors${some.length ? ` (${some.join(", ")}${this.header.tensors.size > 5 ? ", ..." : ""})` : ""}; check the name, or whether this checkpoint belongs to another model.`,
      });
    }
    return info;
  }

  /** Reads one tensor into a new buffer. */
  async read(name: string): Promise<SafetensorsTensor> {
    const info = this.info(name);
    const data = new Uint8Array(info.byteLength);
    await this.readInto(name, data);
    return { name, dtype: info.dtype, shape: info.shape, data };
  }

  /** Reads one tensor's bytes into `target`, whose byteLength must equal the tensor's. */
  async readInto(name: string, target: ArrayBufferView): Promise<void> {
    if (this.closed) throw new Error(`SafetensorsReader for ${this.path} is closed`);
    const info = this.info(name);
    if (target.byteLength !== info.byteLength) {
      throw new CheckpointError(
        `tensor ${JSON.stringify(name)} has ${info.byteLength} bytes (${info.dtype} [${info.shape.join(", ")}]), but the target holds ${target.byteLength}`,
        { where: this.path, hint: "Allocate the target from the tensor's info(): its dtype and shape." },
      );
    }
    const bytes = new Uint8Array(target.buffer, target.byteOffset, target.byteLength);
    try {
      await readFully(this.file, bytes, this.header.dataStart + info.dataOffsets[0], this.path);
    } catch (err) {
      if (err instanceof CheckpointError) throw err;
      throw openError(err, this.path);
    }
  }

  /** Reads bytes [byteStart, byteStart + target.byteLength) of one tensor's data into `target`. */
  async readRange(name: string, byteStart: number, target: Uint8Array): Promise<void> {
    if (this.closed) throw new Error(`SafetensorsReader for ${this.path} is closed`);
    const info = this.info(name);
    if (byteStart < 0 || byteStart + target.byteLength > info.byteLength) {
      throw new RangeError(`bytes ${byteStart}..${byteStart + target.byteLength} are outside tensor ${JSON.stringify(name)} (${info.byteLength} bytes)`);
    }
    try {
      await readFully(this.file, target, this.header.dataStart + info.dataOffsets[0] + byteStart, this.path);
    } catch (err) {
      if (err instanceof CheckpointError) throw err;
      throw openError(err, this.path);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.file.close();
  }
}

/** Opens a safetensors file for reading tensors one at a time. */
export function openSafetensors(path: string): Promise<SafetensorsReader> {
  return SafetensorsReader.open(path);
}
