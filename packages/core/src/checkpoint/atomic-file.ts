import { open, rename, rm, type FileHandle } from "node:fs/promises";
import { errorCode, messageOf, stagingPathFor, syncDirectory } from "../fs/durable-write.js";
import path from "node:path";
import { CheckpointError, KilnError } from "@kiln/contract";

/**
 * Writes a file so that readers see either the old file or the whole new one:
 * the content goes to a temp file in the target's directory
 * (`.<name>.<pid>.<random>.tmp`), which is fsynced, renamed over the target,
 * and then the directory is fsynced so the rename survives a power cut.
 * On failure the temp file is removed and an existing target is untouched.
 */
export async function writeFileAtomically(target: string, write: (file: FileHandle) => Promise<void>): Promise<void> {
  const absolute = path.resolve(target);
  const dir = path.dirname(absolute);
  const temp = stagingPathFor(absolute);

  let file: FileHandle;
  try {
    file = await open(temp, "wx");
  } catch (err) {
    throw directoryError(err, dir);
  }
  try {
    try {
      await write(file);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temp, absolute);
  } catch (err) {
    await rm(temp, { force: true }).catch(() => undefined);
    throw writeError(err, absolute);
  }
  await syncDirectoryOrFail(dir);
}

export async function syncDirectoryOrFail(dir: string): Promise<void> {
  try {
    await syncDirectory(dir, ["EINVAL", "ENOTSUP", "EISDIR"]);
  } catch (err) {
    throw new CheckpointError(`could not flush directory after writing into it (${messageOf(err)})`, {
      where: dir,
      hint: "The file is in place but may not survive a power loss; check the disk's health and write again.",
      cause: err,
    });
  }
}

export function directoryError(err: unknown, dir: string): CheckpointError {
  const code = errorCode(err);
  const [what, hint] =
    code === "ENOENT"
      ? ["directory does not exist", "Create it first, or choose another output directory."]
      : code === "ENOTDIR"
        ? ["a parent of this path is a file, not a directory", "Choose an output path inside a directory."]
        : code === "EACCES" || code === "EPERM"
          ? ["directory is not writable", "Fix its permissions, or choose a directory you can write to."]
          : code === "EROFS"
            ? ["directory is on a read-only file system", "Choose an output directory on a writable disk."]
            : code === "ENOSPC" || code === "EDQUOT"
              ? ["no space left to create a file in the directory", "Free disk space, or write to another disk."]
              : [`cannot create a file in the directory (${messageOf(err)})`, "Choose another output directory."];
  return new CheckpointError(`cannot write a checkpoint here: ${what}`, { where: dir, hint, cause: err });
}

export function writeError(err: unknown, target: string): KilnError {
  if (err instanceof KilnError) return err;
  const code = errorCode(err);
  const [what, hint] =
    code === "ENOSPC" || code === "EDQUOT"
      ? ["disk full while writing", "Free disk space or write to another disk; the previous file, if any, is unchanged."]
      : code === "EISDIR"
        ? ["the target path is a directory", "Choose a file name, not a directory, for the checkpoint."]
        : [`could not write (${messageOf(err)})`, "The previous file, if any, is unchanged; fix the cause and write again."];
  return new CheckpointError(what, { where: target, hint, cause: err });
}

export { errorCode, messageOf };
