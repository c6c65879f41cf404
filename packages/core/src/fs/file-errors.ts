import { KilnError, type KilnErrorDetails } from "@kiln/contract";
import { ERRNO_TABLE, errorCode, messageOf } from "./errno-table.js";

/** The KilnError class a file error is reported as (DataError, CheckpointError, ...). */
export type FileErrorClass = new (message: string, details?: KilnErrorDetails) => KilnError;

/** Who explains a file error: what the file is, the error class to raise, and hints of the caller's own. */
export interface FileErrorContext {
  /** What the file is, as a message names it: "token file", "checkpoint file". */
  what: string;
  /** Default KilnError. */
  error?: FileErrorClass;
  /** A hint for a code that says more than the table's (by code: "ENOENT" -> "Check the path, or ..."). */
  hints?: Readonly<Partial<Record<string, string>>>;
  /** Said after the hint whatever the code: what the failure left behind, or what else to try. */
  after?: string;
}

/**
 * The error for a file that cannot be opened or read: "<what> <meaning>", where the
 * meaning comes from ERRNO_TABLE. A KilnError passes through unchanged.
 */
export function fileReadError(err: unknown, where: string, ctx: FileErrorContext): KilnError {
  if (err instanceof KilnError) return err;
  const code = errorCode(err);
  const meaning = code === undefined ? undefined : ERRNO_TABLE[code];
  const message = meaning?.read ? `${ctx.what} ${meaning.read}` : `cannot read ${ctx.what} (${messageOf(err)})`;
  const hint = hintFor(code, ctx) ?? meaning?.readHint ?? "Check that the file exists and is readable.";
  return new (ctx.error ?? KilnError)(message, { where, hint: withAfter(hint, ctx), cause: err });
}

/**
 * The error for a file that cannot be written: "cannot write <what>: <why>" (or
 * "cannot <doing>: <why>"), where the reason comes from ERRNO_TABLE. A KilnError
 * passes through unchanged.
 */
export function fileWriteError(err: unknown, where: string, ctx: FileErrorContext & { doing?: string }): KilnError {
  if (err instanceof KilnError) return err;
  const code = errorCode(err);
  const meaning = code === undefined ? undefined : ERRNO_TABLE[code];
  const doing = ctx.doing ?? `write ${ctx.what}`;
  const message = meaning?.write ? `cannot ${doing}: ${meaning.write}` : `cannot ${doing} (${messageOf(err)})`;
  const hint = hintFor(code, ctx) ?? meaning?.writeHint ?? "Fix the cause and write again.";
  return new (ctx.error ?? KilnError)(message, { where, hint: withAfter(hint, ctx), cause: err });
}

function withAfter(hint: string, ctx: FileErrorContext): string {
  return ctx.after ? `${hint} ${ctx.after}` : hint;
}

function hintFor(code: string | undefined, ctx: FileErrorContext): string | undefined {
  return code === undefined ? undefined : ctx.hints?.[code];
}
