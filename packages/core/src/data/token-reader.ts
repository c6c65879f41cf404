import { endianness } from "node:os";
import type { FileHandle } from "node:fs/promises";
import { DataError } from "@kiln/contract";
import type { TokenFileLayout } from "./token-file-format.js";

const HOST_IS_LITTLE_ENDIAN = endianness() === "LE";
// Node caps one read at about 2 GiB; longer spans are read in pieces.
const MAX_READ_BYTES = 1 << 30;

/**
 * Reads tokens [start, start + count) of a token file into `into[0 .. count)`
 * with positioned reads straight into `into`'s memory: no intermediate buffer.
 * u16 ids are read into the upper half of the target bytes and widened in place.
 */
export async function readTokensInto(file: FileHandle, layout: TokenFileLayout, filePath: string, start: number, count: number, into: Int32Array): Promise<void> {
  if (!Number.isInteger(start) || !Number.isInteger(count) || start < 0 || count < 0 || start + count > layout.tokenCount) {
    throw new RangeError(`token range [${start}, ${start + count}) is outside ${filePath}'s ${layout.tokenCount} tokens`);
  }
  if (count > into.length) throw new RangeError(`cannot read ${count} tokens into an array of ${into.length}`);
  if (count === 0) return;
  const targetBytes = new Uint8Array(into.buffer, into.byteOffset, count * 4);
  const position = layout.headerBytes + start * layout.tokenBytes;
  if (layout.tokenBytes === 4) {
    await readFully(file, targetBytes, position, filePath);
    if (!HOST_IS_LITTLE_ENDIAN) swapWords(targetBytes);
    return;
  }
  // u16: the 2*count file bytes go to the upper half; widening front to back never
  // overwrites an id before it is read (id i is read from byte 2*count + 2*i >= 4*i + 4).
  const upper = targetBytes.subarray(count * 2);
  await readFully(file, upper, position, filePath);
  const view = new DataView(upper.buffer, upper.byteOffset, upper.byteLength);
  for (let i = 0; i < count; i++) into[i] = view.getUint16(2 * i, true);
}

async function readFully(file: FileHandle, target: Uint8Array, position: number, filePath: string): Promise<void> {
  let done = 0;
  while (done < target.byteLength) {
    const length = Math.min(target.byteLength - done, MAX_READ_BYTES);
    const { bytesRead } = await file.read(target, done, length, position + done);
    if (bytesRead === 0) {
      throw new DataError(`token file ended at byte ${position + done}, before the ${target.byteLength} bytes expected at ${position}`, {
        where: filePath,
        hint: "The file was truncated or replaced while training read it; do not change a token file during training.",
      });
    }
    done += bytesRead;
  }
}

function swapWords(bytes: Uint8Array): void {
  for (let i = 0; i + 3 < bytes.length; i += 4) {
    const a = bytes[i];
    const b = bytes[i + 1];
    bytes[i] = bytes[i + 3];
    bytes[i + 1] = bytes[i + 2];
    bytes[i + 2] = b;
    bytes[i + 3] = a;
  }
}
