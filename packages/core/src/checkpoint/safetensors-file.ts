import { readFile } from "node:fs/promises";
import { CheckpointError, type KilnError } from "@kiln/contract";
import { errorCode } from "../fs/errno-table.js";
import { fileReadError } from "../fs/file-errors.js";
import { writeFileAtomically } from "../fs/write-atomically.js";
import { SequentialFileWriter, WRITE_BUFFER_BYTES } from "./file-io.js";
import { decodeSafetensors, type DecodedSafetensors } from "./safetensors-codec.js";
import { bytesOf, planSafetensorsLayout, type StreamedTensorInput } from "./safetensors-layout.js";
import { isTensorByteSource } from "./tensor-byte-source.js";

/**
 * Writes a safetensors file atomically (see writeFileAtomically): a reader, or
 * a crash, never sees a half-written file. Tensors are checked before anything
 * is created; their order in the file is described at planSafetensorsLayout.
 * A tensor whose data is a TensorByteSource is streamed through one buffer of
 * `bufferBytes` (default 4 MiB), tensor by tensor, so the file is never whole in memory.
 */
export async function writeSafetensors(
  path: string,
  tensors: readonly StreamedTensorInput[],
  metadata: Readonly<Record<string, string>> = {},
  options: { bufferBytes?: number } = {},
): Promise<void> {
  const layout = planSafetensorsLayout(tensors, metadata, path);
  await writeFileAtomically(
    path,
    async (file) => {
      const out = new SequentialFileWriter(file, options.bufferBytes ?? WRITE_BUFFER_BYTES);
      await out.append(layout.head);
      for (const { input } of layout.tensors) {
        if (isTensorByteSource(input.data)) await out.appendFrom(input.data);
        else await out.append(bytesOf(input.data));
      }
      await out.flush();
    },
    { what: "checkpoint file", error: CheckpointError },
  );
}

/**
 * Reads and checks a whole safetensors file. For files too large to hold in
 * memory at once (or over 2 GiB), use openSafetensors, which reads tensors one at a time.
 */
export async function readSafetensors(path: string): Promise<DecodedSafetensors> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (err) {
    throw openError(err, path);
  }
  return decodeSafetensors(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), path);
}

/** A CheckpointError for a checkpoint file that cannot be opened or read (a KilnError passes through). */
export function openError(err: unknown, path: string): KilnError {
  // A buffer too large to allocate is a RangeError without a code: the same fault as Node's ERR_FS_FILE_TOO_LARGE.
  const tooLarge = err instanceof RangeError && errorCode(err) === undefined;
  return fileReadError(tooLarge ? Object.assign(new RangeError(err.message, { cause: err }), { code: "ERR_FS_FILE_TOO_LARGE" }) : err, path, {
    what: "checkpoint file",
    error: CheckpointError,
    hints: {
      ENOENT: "Check the path; list the checkpoint directory to see what was saved.",
      EISDIR: "Name the .safetensors file inside it.",
      ERR_FS_FILE_TOO_LARGE: "Use openSafetensors, which reads one tensor at a time.",
    },
  });
}
