import fs from "node:fs";
import { errorCode } from "./errno-table.js";
import { type FileErrorContext, fileWriteError } from "./file-errors.js";

/** Every write lands at the end, also after a cut back (cutBack). */
const APPEND = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_APPEND;

/**
 * A log that grows by whole records (JSON lines, TensorBoard event records) while
 * a run goes on: append() writes all of a record's bytes or, when the disk refuses
 * part way, cuts the file back to where the record began, so no later record is
 * ever glued to half of one. close() fsyncs the file.
 */
export class RecordLogFile {
  private size: number;

  private constructor(
    private readonly fd: number,
    readonly path: string,
    private readonly ctx: FileErrorContext,
  ) {
    this.size = fs.fstatSync(fd).size;
  }

  /** `file` opened to append to, created when missing. */
  static openToAppend(file: string, ctx: FileErrorContext): RecordLogFile {
    return RecordLogFile.open(file, APPEND, ctx)!;
  }

  /** A new file at `file`; undefined when a file of that name exists. */
  static createNew(file: string, ctx: FileErrorContext): RecordLogFile | undefined {
    return RecordLogFile.open(file, APPEND | fs.constants.O_EXCL, ctx);
  }

  private static open(file: string, flags: number, ctx: FileErrorContext): RecordLogFile | undefined {
    let fd: number;
    try {
      fd = fs.openSync(file, flags);
    } catch (err) {
      if (flags & fs.constants.O_EXCL && errorCode(err) === "EEXIST") return undefined;
      throw fileWriteError(err, file, ctx);
    }
    return new RecordLogFile(fd, file, ctx);
  }

  /** Bytes in the file: whole records only. */
  get byteLength(): number {
    return this.size;
  }

  append(record: string | Uint8Array): void {
    const bytes = typeof record === "string" ? Buffer.from(record, "utf8") : record;
    let done = 0;
    try {
      while (done < bytes.byteLength) done += fs.writeSync(this.fd, bytes, done, bytes.byteLength - done);
    } catch (err) {
      if (done > 0) this.cutBack();
      throw fileWriteError(err, this.path, { ...this.ctx, after: "The records written before this one are whole." });
    }
    this.size += bytes.byteLength;
  }

  close(): void {
    try {
      fs.fsyncSync(this.fd);
    } catch (err) {
      throw fileWriteError(err, this.path, this.ctx);
    } finally {
      fs.closeSync(this.fd);
    }
  }

  /** Drops the part of a record a failed append left at the end. */
  private cutBack(): void {
    try {
      fs.ftruncateSync(this.fd, this.size);
    } catch {
      // The disk refused the write; if it refuses the cut too, readers still stop at the part record (each frames or ends its records).
    }
  }
}
