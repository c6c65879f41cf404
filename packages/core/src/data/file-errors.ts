import { DataError } from "@kiln/contract";
import { errorCode, messageOf } from "../fs/durable-write.js";

export { errorCode, messageOf };

/** A DataError for a token or text file that cannot be opened or read. */
export function readError(err: unknown, path: string, what = "token file"): DataError {
  if (err instanceof DataError) return err;
  const code = errorCode(err);
  const [message, hint] =
    code === "ENOENT"
      ? [`${what} not found`, what === "token file" ? "Check the path, or create the file with `kiln prepare`." : "Check the path."]
      : code === "EISDIR"
        ? [`${what} path is a directory`, `Give the path of a file, not a directory.`]
        : code === "EACCES" || code === "EPERM"
          ? [`${what} is not readable (permission denied)`, "Fix its permissions."]
          : [`cannot read ${what} (${messageOf(err)})`, "Check that the file exists and is readable."];
  return new DataError(message, { where: path, hint, cause: err });
}

/** A DataError for an output path whose directory cannot take a new file. */
export function writeError(err: unknown, path: string, what = "token file"): DataError {
  if (err instanceof DataError) return err;
  const code = errorCode(err);
  const [message, hint] =
    code === "ENOENT"
      ? ["output directory does not exist", "Create the directory first, or choose another output path."]
      : code === "ENOTDIR"
        ? ["a parent of the output path is a file, not a directory", "Choose an output path inside a directory."]
        : code === "EACCES" || code === "EPERM"
          ? ["output directory is not writable (permission denied)", "Fix its permissions, or write somewhere you can."]
          : code === "EROFS"
            ? ["output directory is on a read-only file system", "Choose an output directory on a writable disk."]
            : code === "ENOSPC" || code === "EDQUOT"
              ? ["disk full while writing", "Free disk space or write to another disk; nothing was left half-written."]
              : code === "EISDIR"
                ? ["output path is a directory", "Give a file name such as data/corpus.bin."]
                : [`cannot write ${what} (${messageOf(err)})`, "Fix the cause and run again; nothing was left half-written."];
  return new DataError(`cannot write ${what}: ${message}`, { where: path, hint, cause: err });
}
