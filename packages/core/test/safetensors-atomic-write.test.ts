import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CheckpointError } from "@kiln/contract";
import { readSafetensors, writeSafetensors, type SafetensorsTensorInput } from "../src/index.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "kiln-st-atomic-"));
});
afterEach(async () => {
  await chmod(dir, 0o700).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

const good: SafetensorsTensorInput[] = [{ name: "w", dtype: "F32", shape: [2], data: new Float32Array([1, 2]) }];

async function rejection(p: Promise<unknown>): Promise<CheckpointError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CheckpointError);
  return err as CheckpointError;
}

describe("writeSafetensors is atomic", () => {
  it("replaces an existing file and leaves no temp files", async () => {
    const file = path.join(dir, "model.safetensors");
    await writeSafetensors(file, good);
    await writeSafetensors(file, [{ name: "v", dtype: "U8", shape: [1], data: new Uint8Array([5]) }], { step: "2" });
    const got = await readSafetensors(file);
    expect([...got.tensors.keys()]).toEqual(["v"]);
    expect(got.metadata).toEqual({ step: "2" });
    expect(await readdir(dir)).toEqual(["model.safetensors"]);
  });

  it("leaves the existing file untouched when a tensor's bytes disagree with its shape", async () => {
    const file = path.join(dir, "model.safetensors");
    await writeSafetensors(file, good);
    const before = await readFile(file);
    const err = await rejection(
      writeSafetensors(file, [...good, { name: "bad", dtype: "F32", shape: [3], data: new Float32Array(2) }]),
    );
    expect(err.message).toMatch(/data has 8 bytes, but shape \[3\] of F32 needs 12/);
    expect(err.where).toBe(`${file} (tensor "bad")`);
    expect((await readFile(file)).equals(before)).toBe(true);
    expect(await readdir(dir)).toEqual(["model.safetensors"]);
  });

  it("refuses duplicate names, the reserved metadata name and non-string metadata", async () => {
    const file = path.join(dir, "model.safetensors");
    await rejection(writeSafetensors(file, [...good, ...good]));
    await rejection(writeSafetensors(file, [{ ...good[0]!, name: "__metadata__" }]));
    await rejection(writeSafetensors(file, good, { step: 3 } as unknown as Record<string, string>));
    expect(await readdir(dir)).toEqual([]);
  });

  it("removes the temp file when the rename fails after the data was written", async () => {
    const target = path.join(dir, "taken");
    await mkdir(target);
    await writeFile(path.join(target, "keep.txt"), "x");
    const err = await rejection(writeSafetensors(target, good));
    expect(err.where).toBe(target);
    expect(err.message).toMatch(/directory/);
    expect((await readdir(dir)).sort()).toEqual(["taken"]);
    expect(await readdir(target)).toEqual(["keep.txt"]);
  });

  it("says which directory is missing", async () => {
    const missing = path.join(dir, "no", "such");
    const err = await rejection(writeSafetensors(path.join(missing, "m.safetensors"), good));
    expect(err.where).toBe(missing);
    expect(err.message).toMatch(/does not exist/);
    expect(err.hint).toMatch(/Create it/);
  });

  it("says which path component is a file", async () => {
    await writeFile(path.join(dir, "file"), "x");
    const err = await rejection(writeSafetensors(path.join(dir, "file", "m.safetensors"), good));
    expect(err.where).toBe(path.join(dir, "file"));
  });

  it.skipIf(process.getuid?.() === 0)("says which directory is not writable (skipped as root, who may write anywhere)", async () => {
    const locked = path.join(dir, "locked");
    await mkdir(locked);
    await chmod(locked, 0o500);
    const err = await rejection(writeSafetensors(path.join(locked, "m.safetensors"), good));
    expect(err.where).toBe(locked);
    expect(err.message).toMatch(/not writable/);
  });
});
