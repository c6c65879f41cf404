import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { DataError } from "@kiln/contract";
import { afterEach, expect } from "vitest";
import { encodeLlmcHeader } from "../src/data/index.js";

const dirs: string[] = [];

/** A fresh temp directory, removed after the test. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "kiln-data-"));
  dirs.push(dir);
  return dir;
}

afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

export function u32Bytes(ids: ArrayLike<number>): Uint8Array {
  const bytes = new Uint8Array(ids.length * 4);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < ids.length; i++) view.setUint32(i * 4, ids[i], true);
  return bytes;
}

export function u16ShardBytes(ids: ArrayLike<number>, headerCount = ids.length): Uint8Array {
  const header = encodeLlmcHeader(headerCount, 2);
  const bytes = new Uint8Array(header.byteLength + ids.length * 2);
  bytes.set(header);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < ids.length; i++) view.setUint16(header.byteLength + i * 2, ids[i], true);
  return bytes;
}

export async function writeU32File(dir: string, name: string, ids: ArrayLike<number>): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, u32Bytes(ids));
  return file;
}

/** Ids 0, 1, 2, ... n-1 (mod `modulo`): a token's value says where it came from. */
export function countingIds(n: number, modulo = 2 ** 31): Uint32Array {
  return Uint32Array.from({ length: n }, (_, i) => i % modulo);
}

/** The DataError `promise` is refused with (the test fails when it resolves or throws another error). */
export async function dataRefusal(promise: Promise<unknown>): Promise<DataError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DataError);
  return err as DataError;
}
