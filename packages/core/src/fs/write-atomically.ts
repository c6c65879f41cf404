import { randomBytes } from "node:crypto";
import fs from "node:fs";
import { type FileHandle, mkdir, open, readdir, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { KilnError } from "@kiln/contract";
import { errorCode, messageOf } from "./errno-table.js";
import { type FileErrorContext, fileWriteError } from "./file-errors.js";

// Writes that a reader, or a crash, sees whole or not at all: the bytes go to a
// temp name beside the target (`.<name>.<pid>.<random>.tmp`), which is fsynced and
// renamed over the target; then the target's directory is fsynced so the rename
// survives a power cut. On failure the temp is removed and the previous target,
// if any, is left as it was. Three shapes: a whole file (writeFileAtomically, and
// writeFileAtomicallySync for synchronous callers), a file streamed in parts over
// time (AtomicOutputFile), and a folder (writeDirectoryAtomically).

/** What is written, for messages, and how the temp name is made. */
export interface AtomicWriteOptions extends Partial<FileErrorContext> {
  /**
   * The temp name's stem in place of the target's name (`.<stem>.<pid>.<random>.tmp`),
   * where a temp named after the target would be taken for one (TensorBoard reads
   * every file whose name holds "tfevents").
   */
  tempStem?: string;
}

/** What a whole-file write puts in the file: its bytes, or a function writing them to the open temp file. */
export type FileContent = string | Uint8Array | ((file: FileHandle) => Promise<void>);

/** Codes with which a file system says it cannot fsync a directory (the rename has happened either way). */
const DIRECTORY_SYNC_UNSUPPORTED = new Set(["EINVAL", "ENOTSUP", "EOPNOTSUPP", "EISDIR", "EPERM"]);
const UNCHANGED = "Nothing was left half-written: the previous file, if any, is unchanged.";

/** Writes `content` to `target` atomically (see above); failures are KilnErrors of `options.error`. */
export async function writeFileAtomically(target: string, content: FileContent, options: AtomicWriteOptions = {}): Promise<void> {
  const out = await AtomicOutputFile.create(target, options);
  try {
    if (typeof content === "function") await content(out.file);
    else await out.append(typeof content === "string" ? new TextEncoder().encode(content) : content);
  } catch (err) {
    await out.abort();
    throw fileWriteError(err, out.target, context(options, UNCHANGED));
  }
  await out.commit();
}

/** writeFileAtomically for callers that cannot wait (constructors, exit handlers). */
export function writeFileAtomicallySync(target: string, content: string | Uint8Array, options: AtomicWriteOptions = {}): void {
  const absolute = path.resolve(target);
  const temp = tempPathFor(absolute, options.tempStem);
  let fd: number;
  try {
    fd = fs.openSync(temp, "wx");
  } catch (err) {
    throw createError(err, absolute, options, isDirectorySync(path.dirname(absolute)));
  }
  try {
    try {
      fs.writeFileSync(fd, content);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, absolute);
  } catch (err) {
    try {
      fs.rmSync(temp, { force: true });
    } catch {
      // The write's own error, thrown below, is the one to report.
    }
    throw fileWriteError(err, absolute, context(options, UNCHANGED));
  }
  try {
    syncDirectorySync(path.dirname(absolute));
  } catch (err) {
    throw unflushedError(err, absolute, options);
  }
}

/**
 * A file that appears at its target path whole or not at all, written in parts:
 * append() adds bytes to the temp file (truncate() takes some back); commit() fsyncs
 * it, renames it over the target and fsyncs the directory; abort() removes it.
 */
export class AtomicOutputFile {
  private state: "open" | "committed" | "aborted" = "open";
  private position = 0;

  private constructor(
    readonly target: string,
    private readonly tempPath: string,
    /** The open temp file (writeFileAtomically hands it to a content function). */
    readonly file: FileHandle,
    private readonly options: AtomicWriteOptions,
  ) {}

  /** Creates the temp file; fails naming the directory when it cannot. */
  static async create(target: string, options: AtomicWriteOptions = {}): Promise<AtomicOutputFile> {
    const absolute = path.resolve(target);
    const temp = tempPathFor(absolute, options.tempStem);
    let file: FileHandle;
    try {
      file = await open(temp, "wx");
    } catch (err) {
      throw createError(err, absolute, options, await isDirectory(path.dirname(absolute)));
    }
    return new AtomicOutputFile(absolute, temp, file, options);
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
      throw fileWriteError(err, this.target, context(this.options, UNCHANGED));
    }
  }

  /** Cuts what was appended back to its first `bytes` bytes; the next append() goes on from there. */
  async truncate(bytes: number): Promise<void> {
    if (this.state !== "open") throw new Error(`truncate() after the output file was ${this.state}`);
    if (!(Number.isSafeInteger(bytes) && bytes >= 0 && bytes <= this.position)) throw new RangeError(`cannot truncate ${this.position} bytes to ${bytes}`);
    try {
      await this.file.truncate(bytes);
      this.position = bytes;
    } catch (err) {
      await this.abort();
      throw fileWriteError(err, this.target, context(this.options, UNCHANGED));
    }
  }

  async commit(): Promise<void> {
    if (this.state !== "open") throw new Error(`commit() after the output file was ${this.state}`);
    this.state = "committed";
    try {
      try {
        await this.file.sync();
      } finally {
        await this.file.close();
      }
      await rename(this.tempPath, this.target);
    } catch (err) {
      await rm(this.tempPath, { force: true }).catch(() => undefined);
      throw fileWriteError(err, this.target, context(this.options, UNCHANGED));
    }
    await flushDirectory(path.dirname(this.target), this.target, this.options);
  }

  /** Drops the temp file; the target, if it existed, is untouched. Safe to call twice. */
  async abort(): Promise<void> {
    if (this.state !== "open") return;
    this.state = "aborted";
    await this.file.close().catch(() => undefined);
    await rm(this.tempPath, { force: true }).catch(() => undefined);
  }
}

/**
 * Writes a folder that appears whole or not at all: `fill` writes into a staging
 * folder beside the target, which is fsynced and renamed to the target; then the
 * parent is fsynced. On failure the staging folder is removed. The target must not
 * exist, or be empty; missing parents are created. `fill` should write its files
 * durably too (writeFileAtomically, writeSafetensors).
 */
export async function writeDirectoryAtomically(target: string, fill: (dir: string) => Promise<void>, options: AtomicWriteOptions = {}): Promise<void> {
  const absolute = path.resolve(target);
  const ctx = { what: "output folder", ...options };
  await refuseNonEmpty(absolute, target, ctx);
  const parent = path.dirname(absolute);
  const staging = tempPathFor(absolute, options.tempStem);
  try {
    await mkdir(parent, { recursive: true });
    await mkdir(staging);
  } catch (err) {
    throw fileWriteError(err, parent, context(ctx));
  }
  try {
    await fill(staging);
    await syncDirectory(staging);
    await rename(staging, absolute);
  } catch (err) {
    await rm(staging, { recursive: true, force: true }).catch(() => undefined);
    if (errorCode(err) === "ENOTEMPTY" || errorCode(err) === "EEXIST") throw notEmpty(target, ctx);
    throw fileWriteError(err, absolute, context(ctx, "Nothing was left half-written."));
  }
  await flushDirectory(parent, absolute, ctx);
}

/** Where an atomic write of `absoluteTarget` stages its bytes: `.<name>.<pid>.<random>.tmp` beside it. */
function tempPathFor(absoluteTarget: string, stem = path.basename(absoluteTarget)): string {
  return path.join(path.dirname(absoluteTarget), `.${stem}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`);
}

/** The error context of a write: `after` (what the failure left) goes after the caller's own. */
function context(options: AtomicWriteOptions, after?: string): FileErrorContext {
  const said = [options.after, after].filter((s) => s !== undefined).join(" ");
  return { what: "file", ...options, ...(said ? { after: said } : {}) };
}

/** The temp file could not be created: the fault is the directory's, so the error names it. */
function createError(err: unknown, absolute: string, options: AtomicWriteOptions, dirExists: boolean): KilnError {
  const ctx = context(options);
  const dir = path.dirname(absolute);
  // ENOENT for a new name in a directory that exists: a file system that takes no new files (procfs, sysfs).
  if (errorCode(err) === "ENOENT" && dirExists) {
    return new (ctx.error ?? KilnError)(`cannot write ${ctx.what}: the output directory does not take new files (${messageOf(err)})`, {
      where: dir,
      hint: "Choose an output path on an ordinary writable disk.",
      cause: err,
    });
  }
  return fileWriteError(err, dir, ctx);
}

async function flushDirectory(dir: string, target: string, options: AtomicWriteOptions): Promise<void> {
  try {
    await syncDirectory(dir);
  } catch (err) {
    throw unflushedError(err, target, options);
  }
}

/** The rename happened but the directory could not be flushed: the new file may not survive a power cut. */
function unflushedError(err: unknown, target: string, options: AtomicWriteOptions): KilnError {
  const what = options.what ?? "file";
  return fileWriteError(err, path.dirname(target), {
    ...context(options),
    doing: `flush the directory after writing ${what}`,
    hints: {},
    after: `The ${what} is in place but may not survive a power loss; check the disk's health and write again.`,
  });
}

/** fsyncs a directory so a rename into it survives a power cut (a no-op where the file system cannot). */
async function syncDirectory(dir: string): Promise<void> {
  if (process.platform === "win32") return; // directories cannot be opened for fsync there
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, "r");
    await handle.sync();
  } catch (err) {
    if (!DIRECTORY_SYNC_UNSUPPORTED.has(errorCode(err) ?? "")) throw err;
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

function syncDirectorySync(dir: string): void {
  if (process.platform === "win32") return;
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, "r");
    fs.fsyncSync(fd);
  } catch (err) {
    if (!DIRECTORY_SYNC_UNSUPPORTED.has(errorCode(err) ?? "")) throw err;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

async function refuseNonEmpty(absolute: string, target: string, ctx: FileErrorContext): Promise<void> {
  let entries: string[];
  try {
    entries = await readdir(absolute);
  } catch (err) {
    if (errorCode(err) === "ENOENT") return;
    if (errorCode(err) === "ENOTDIR") throw new (ctx.error ?? KilnError)("the output path is a file", { where: target, hint: "name a new folder to write into" });
    throw fileWriteError(err, absolute, ctx);
  }
  if (entries.length > 0) throw notEmpty(target, ctx);
}

function notEmpty(target: string, ctx: FileErrorContext): KilnError {
  return new (ctx.error ?? KilnError)(`the ${ctx.what} already exists and is not empty`, { where: target, hint: "name a new folder, or remove this one first" });
}

async function isDirectory(dir: string): Promise<boolean> {
  return stat(dir).then(
    (s) => s.isDirectory(),
    () => false,
  );
}

function isDirectorySync(dir: string): boolean {
  try {
    return fs.statSync(dir).isDirectory();
  } catch {
    return false;
  }
}
