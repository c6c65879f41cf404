import { open, rename, rm, stat, type FileHandle } from "node:fs/promises";
import path from "node:path";
import { DataError } from "@kiln/contract";
import { errorCode, messageOf, stagingPathFor, syncDirectory } from "../fs/durable-write.js";
import { writeError } from "./file-errors.js";

/**
 * A file that appears at its target path whole or not at all: bytes go to a
 * temp file beside the target (`.<name>.<pid>.<random>.tmp`); commit() fsyncs
 * it, renames it over the target and fsyncs the directory; abort() removes it.
 */
export class AtomicOutputFile {
  private state: "open" | "committed" | "aborted" = "open";
  private position = 0;

  private constructor(
    readonly target: string,
    readonly tempPath: string,
    private readonly file: FileHandle,
    private readonly what: string,
  ) {}

  /** Creates the temp file; fails with a DataError naming the directory when it cannot. */
  static async create(target: string, what = "token file"): Promise<AtomicOutputFile> {
    const absolute = path.resolve(target);
    const temp = stagingPathFor(absolute);
    let file: FileHandle;
    try {
      file = await open(temp, "wx");
    } catch (err) {
      if (errorCode(err) === "ENOENT" && (await isDirectory(path.dirname(absolute)))) {
        throw new DataError(`cannot write ${what}: the output directory does not take new files (${messageOf(err)})`, {
          where: target,
          hint: "Choose an output path on an ordinary writable disk.",
          cause: err,
        });
      }
      throw writeError(err, target, what);
    }
    return new AtomicOutputFile(absolute, temp, file, what);
  }

  /** Bytes appended so far. */
  get bytesWritten(): number {
    return this.position;
  }

  async append(bytes: Uint8Array): Promise<void> {
    if (this.state !== "open") throw new Error(`append() after the output file was ${this.state}`);
    try {
      let done = 0;
      while (done < bytes.byteLength) {
        const { bytesWritten } = await this.file.write(bytes, done, bytes.byteLength - done, this.position + done);
        done += bytesWritten;
      }
      this.position += bytes.byteLength;
    } catch (err) {
      await this.abort();
      throw writeError(err, this.target, this.what);
    }
  }

  async commit(): Promise<void> {
    if (this.state !== "open") throw new Error(`commit() after the output file was ${this.state}`);
    try {
      await this.file.sync();
      await this.file.close();
      this.state = "committed";
      await rename(this.tempPath, this.target);
    } catch (err) {
      this.state = "committed";
      await this.file.close().catch(() => undefined);
      await rm(this.tempPath, { force: true }).catch(() => undefined);
      throw writeError(err, this.target, this.what);
    }
    await syncDirectory(path.dirname(this.target), ["EINVAL", "ENOTSUP", "EISDIR", "EPERM"]);
  }

  /** Drops the temp file; the target, if it existed, is untouched. Safe to call twice. */
  async abort(): Promise<void> {
    if (this.state !== "open") return;
    this.state = "aborted";
    await this.file.close().catch(() => undefined);
    await rm(this.tempPath, { force: true }).catch(() => undefined);
  }
}

async function isDirectory(dir: string): Promise<boolean> {
  return stat(dir).then(
    (s) => s.isDirectory(),
    () => false,
  );
}
