import { readFile } from "node:fs/promises";
import { CheckpointError } from "@kiln/contract";
import { writeFileAtomically, errorCode, messageOf } from "./atomic-file.js";
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
  await writeFileAtomically(path, async (file) => {
    const out = new SequentialFileWriter(file, options.bufferBytes ?? WRITE_BUFFER_BYTES);
    await out.append(layout.head);
    for (const { input } of layout.tensors) {
      if (isTensorByteSource(input.data)) await out.appendFrom(input.data);
      else await out.append(bytesOf(input.data));
    }
    await out.flush();
  });
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

/** A CheckpointError for a checkpoint file that cannot be opened or read. */
export function openError(err: unknown, path: string): CheckpointError {
  const code = errorCode(err);
  const [what, hint] =
    code === "ENOENT"
      ? ["checkpoint file does not exist", "Check the path; list the checkpoint directory to see what was saved."]
      : code === "EISDIR"
        ? ["path is a directory, not a safetensors file", "Name the .safetensors file inside it."]
        : code === "EACCES" || code === "EPERM"
          ? ["checkpoint file is not readable", "Fix the file's permissions."]
          : code === "ERR_FS_FILE_TOO_LARGE" || err instanceof RangeError
            ? ["file is too large to read into memory at once", "Use openSafetensors, which reads one tensor at a time."]
            : [`cannot read the checkpoint file (${messageOf(err)})`, "Check the path and the disk, then try again."];
  return new CheckpointError(what, { where: path, hint, cause: err });
}
