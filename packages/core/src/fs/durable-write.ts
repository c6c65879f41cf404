import { randomBytes } from "node:crypto";
import { type FileHandle, open } from "node:fs/promises";
import path from "node:path";

/** The `code` of a Node system error (ENOENT, EACCES, ...), if it has one. */
export function errorCode(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "code" in err ? String((err as { code: unknown }).code) : undefined;
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Where an atomic write of `absoluteTarget` stages its bytes: `.<name>.<pid>.<random>.tmp` beside it. */
export function stagingPathFor(absoluteTarget: string): string {
  return path.join(path.dirname(absoluteTarget), `.${path.basename(absoluteTarget)}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`);
}

/**
 * fsyncs a directory so a rename into it survives a power cut. File systems that
 * cannot fsync a directory answer with one of `tolerated` (the rename has happened
 * either way); any other failure is thrown as it came.
 */
export async function syncDirectory(dir: string, tolerated: readonly string[]): Promise<void> {
  if (process.platform === "win32") return; // directories cannot be opened for fsync there
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, "r");
    await handle.sync();
  } catch (err) {
    if (!tolerated.includes(errorCode(err) ?? "")) throw err;
  } finally {
    await handle?.close().catch(() => undefined);
  }
}
