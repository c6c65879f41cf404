import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DataError, KilnError } from "@kiln/contract";
import { AtomicOutputFile, writeDirectoryAtomically, writeFileAtomically, writeFileAtomicallySync } from "../src/index.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "kiln-atomic-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

async function rejection(p: Promise<unknown>): Promise<KilnError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(KilnError);
  return err as KilnError;
}

/** A stream that yields `good` and then fails. */
function failingStream(good: string): Readable {
  return Readable.from(
    (async function* () {
      yield Buffer.from(good);
      throw new Error("the source went away");
    })(),
  );
}

describe("writeFileAtomically", () => {
  it("writes text, bytes, or what a function writes, replacing the file and leaving no temp file", async () => {
    const file = path.join(dir, "out.txt");
    await writeFileAtomically(file, "first\n");
    expect(await readFile(file, "utf8")).toBe("first\n");
    await writeFileAtomically(file, new Uint8Array([104, 105]));
    expect(await readFile(file, "utf8")).toBe("hi");
    await writeFileAtomically(file, (f) => f.writeFile("third"));
    expect(await readFile(file, "utf8")).toBe("third");
    expect(await readdir(dir)).toEqual(["out.txt"]);
  });

  it("keeps the previous file whole when a streamed write fails part way, and removes the temp file", async () => {
    const file = path.join(dir, "corpus.txt");
    await writeFileAtomically(file, "the old content\n");
    let seenWhileWriting: string[] = [];
    const err = await rejection(
      writeFileAtomically(
        file,
        async (f) => {
          for await (const chunk of failingStream("half of the new content")) {
            await f.write(chunk as Buffer);
            seenWhileWriting = await readdir(dir);
          }
        },
        { what: "corpus", error: DataError },
      ),
    );
    expect(err).toBeInstanceOf(DataError);
    expect(err.message).toBe("cannot write corpus (the source went away)");
    expect(err.where).toBe(file);
    expect(err.hint).toMatch(/the previous file, if any, is unchanged/);
    expect(seenWhileWriting.sort()).toEqual(["corpus.txt", expect.stringMatching(/^\.corpus\.txt\.\d+\.[0-9a-f]{12}\.tmp$/)].sort());
    expect(await readFile(file, "utf8")).toBe("the old content\n");
    expect(await readdir(dir)).toEqual(["corpus.txt"]);
  });

  it("names the temp file after tempStem when given", async () => {
    let names: string[] = [];
    await writeFileAtomically(
      path.join(dir, "events.out.tfevents.1"),
      async (f) => {
        names = await readdir(dir);
        await f.writeFile("x");
      },
      { tempStem: "trim" },
    );
    expect(names).toEqual([expect.stringMatching(/^\.trim\.\d+\.[0-9a-f]{12}\.tmp$/)]);
  });

  it("says which directory does not exist, from the errno table", async () => {
    const missing = path.join(dir, "no", "such");
    const err = await rejection(writeFileAtomically(path.join(missing, "f.bin"), "x", { what: "token file", error: DataError }));
    expect(err).toBeInstanceOf(DataError);
    expect(err.message).toBe("cannot write token file: output directory does not exist");
    expect(err.where).toBe(missing);
    expect(err.hint).toMatch(/^Create it first/);
  });
});

describe("AtomicOutputFile", () => {
  it("shows nothing at the target until commit, and abort leaves the older file as it was", async () => {
    const file = path.join(dir, "tokens.bin");
    await writeFile(file, "old");
    const out = await AtomicOutputFile.create(file);
    await out.append(new Uint8Array([1, 2, 3]));
    expect(out.bytesWritten).toBe(3);
    expect(await readFile(file, "utf8")).toBe("old");
    await out.abort();
    await out.abort();
    expect(await readFile(file, "utf8")).toBe("old");
    expect(await readdir(dir)).toEqual(["tokens.bin"]);

    const again = await AtomicOutputFile.create(file);
    await again.append(new Uint8Array([7, 8]));
    await again.commit();
    expect([...(await readFile(file))]).toEqual([7, 8]);
    await expect(again.append(new Uint8Array([9]))).rejects.toThrow(/after the output file was committed/);
  });
});

describe("writeFileAtomicallySync", () => {
  it("replaces a file, and on a failed rename leaves the target as it was and no temp file", async () => {
    const file = path.join(dir, "cache.json");
    writeFileAtomicallySync(file, "{}\n");
    writeFileAtomicallySync(file, '{"a":1}\n');
    expect(await readFile(file, "utf8")).toBe('{"a":1}\n');
    const taken = path.join(dir, "taken");
    await mkdir(taken);
    await writeFile(path.join(taken, "keep.txt"), "x");
    expect(() => writeFileAtomicallySync(taken, "new", { what: "the cache" })).toThrow(
      expect.objectContaining({ message: "cannot write the cache: output path is a directory", where: taken }),
    );
    expect((await readdir(dir)).sort()).toEqual(["cache.json", "taken"]);
    expect(await readdir(taken)).toEqual(["keep.txt"]);
  });
});

describe("writeDirectoryAtomically", () => {
  it("makes the folder appear whole, creating its parents", async () => {
    const out = path.join(dir, "a", "b", "model");
    await writeDirectoryAtomically(out, async (staging) => {
      await writeFileAtomically(path.join(staging, "config.json"), "{}");
      expect(await readdir(path.join(dir, "a", "b"))).toEqual([expect.stringMatching(/^\.model\.\d+\.[0-9a-f]{12}\.tmp$/)]);
    });
    expect(await readdir(path.join(dir, "a", "b"))).toEqual(["model"]);
    expect(await readFile(path.join(out, "config.json"), "utf8")).toBe("{}");
  });

  it("refuses a folder that holds files, and a path that is a file", async () => {
    await mkdir(path.join(dir, "full"));
    await writeFile(path.join(dir, "full", "x"), "x");
    const full = await rejection(writeDirectoryAtomically(path.join(dir, "full"), async () => {}, { error: DataError }));
    expect(full).toBeInstanceOf(DataError);
    expect(full.message).toBe("the output folder already exists and is not empty");
    await writeFile(path.join(dir, "file"), "x");
    expect((await rejection(writeDirectoryAtomically(path.join(dir, "file"), async () => {}))).message).toBe("the output path is a file");
    expect((await readdir(dir)).sort()).toEqual(["file", "full"]);
  });
});
