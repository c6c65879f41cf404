import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Command, CommanderError } from "commander";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { KilnError } from "@kiln/contract";
import { getTokenizer, openTokenDataset, readDataSidecar } from "@kiln/core";
import { registerPrepare } from "../src/commands/prepare.js";
import { REPO_ROOT } from "./e2e/support/paths.js";

const TINY_TOKENIZER_DIR = path.join(REPO_ROOT, "packages", "core", "test", "fixtures", "tiny-bpe-tokenizer");

/** Runs `kiln <argv>` with only the prepare command, in-process, as main() does. */
async function run(argv: string[], onStderr?: (text: string) => void) {
  let out = "";
  let err = "";
  const o = vi.spyOn(process.stdout, "write").mockImplementation((s) => ((out += String(s)), true));
  const e = vi.spyOn(process.stderr, "write").mockImplementation((s) => ((err += String(s)), onStderr?.(String(s)), true));
  const program = new Command("kiln").exitOverride();
  registerPrepare(program);
  try {
    await program.parseAsync(argv, { from: "user" });
    return { code: 0, out, err };
  } catch (error) {
    if (error instanceof CommanderError) return { code: error.exitCode, out, err };
    if (error instanceof KilnError) return { code: error.exitCode, out, err: `${err}kiln: ${error.describe()}\n` };
    throw error;
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "kiln-prepare-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const at = (...parts: string[]) => path.join(dir, ...parts);

describe("kiln prepare", () => {
  it("tokenizes files and a directory into a u32 .bin with its sidecar", async () => {
    await mkdir(at("corpus", "more"), { recursive: true });
    await writeFile(at("corpus", "a.txt"), "Once upon a time, there was a fox.\n");
    await writeFile(at("corpus", "more", "b.txt"), "The fox ran to the river.\n");
    await writeFile(at("corpus", ".hidden"), "not text");
    await writeFile(at("extra.txt"), "The end.\n");
    const out = at("data", "stories.bin");

    const { code, out: stdout, err } = await run(["prepare", "-i", at("corpus"), at("extra.txt"), "-o", out, "--tokenizer", "gpt2", "--val", "0.05"]);
    expect(err).toMatch(/tokenizing 3 files/);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^wrote .*stories\.bin: \d+ tokens from 3 files, 0 skipped \(tokenizer gpt2, vocab 50257, validation 0\.05\); sidecar .*stories\.bin\.json\n$/);

    const sidecar = await readDataSidecar(out);
    expect(sidecar).toMatchObject({ tokenizer: "gpt2", vocab_size: 50257, val_fraction: 0.05, format: "u32" });
    expect(sidecar!.sources).toEqual([at("corpus", "a.txt"), at("corpus", "more", "b.txt"), at("extra.txt")]);

    const gpt2 = await getTokenizer("gpt2");
    const data = await openTokenDataset(out, { vocabSize: sidecar!.vocab_size });
    const ids = new Int32Array(data.tokenCount);
    await data.read(0, data.tokenCount, ids);
    await data.close();
    expect(sidecar!.tokens).toBe(ids.length);
    expect(gpt2.decode(ids)).toBe("<|endoftext|>Once upon a time, there was a fox.\n<|endoftext|>The fox ran to the river.\n<|endoftext|>The end.\n");
    expect((await readdir(at("data"))).sort()).toEqual(["stories.bin", "stories.bin.json"]);
  });

  it("uses the bytes tokenizer and the default validation fraction", async () => {
    await writeFile(at("a.txt"), "héllo");
    const { code } = await run(["prepare", "-i", at("a.txt"), "-o", at("a.bin"), "--tokenizer", "bytes"]);
    expect(code).toBe(0);
    expect(await readDataSidecar(at("a.bin"))).toEqual({ tokenizer: "bytes", vocab_size: 256, tokens: 6, val_fraction: 0.01, sources: [at("a.txt")], format: "u32" });
    expect([...new Uint32Array((await readFile(at("a.bin"))).buffer.slice(0))]).toEqual([104, 0xc3, 0xa9, 108, 108, 111]);
  });

  it("fails on a missing input file, naming it", async () => {
    const { code, err } = await run(["prepare", "-i", at("nope.txt"), "-o", at("o.bin")]);
    expect(code).toBe(1);
    expect(err).toContain(`kiln: DataError in ${at("nope.txt")}: input file not found`);
    expect(await readdir(dir)).toEqual([]);
  });

  it("fails on empty input and writes nothing", async () => {
    await writeFile(at("empty.txt"), "");
    const { code, err } = await run(["prepare", "-i", at("empty.txt"), "-o", at("o.bin")]);
    expect(code).toBe(1);
    expect(err).toMatch(/DataError in .*empty\.txt: the input holds no text/);
    expect(await readdir(dir)).toEqual(["empty.txt"]);
  });

  it("fails on an empty input directory", async () => {
    await mkdir(at("nothing"));
    const { code, err } = await run(["prepare", "-i", at("nothing"), "-o", at("o.bin")]);
    expect(code).toBe(1);
    expect(err).toMatch(/input directory holds no files/);
  });

  it("fails when the output directory cannot be made or written", async () => {
    await writeFile(at("a.txt"), "text");
    const underFile = await run(["prepare", "-i", at("a.txt"), "-o", at("a.txt", "o.bin")]);
    expect(underFile.code).toBe(1);
    expect(underFile.err).toMatch(/cannot create the output directory: a file is in the way: the output path, or a parent of it, is a file/);

    await mkdir(at("out-dir"));
    const isDir = await run(["prepare", "-i", at("a.txt"), "-o", at("out-dir")]);
    expect(isDir.code).toBe(1);
    expect(isDir.err).toMatch(/output path is a directory/);

    const overInput = await run(["prepare", "-i", at("a.txt"), "-o", at("a.txt")]);
    expect(overInput.code).toBe(1);
    expect(overInput.err).toMatch(/the output file is also an input/);
    expect(await readFile(at("a.txt"), "utf8")).toBe("text");
  });

  it("tokenizes with a Hugging Face tokenizer folder, recording its identity and folder", async () => {
    await writeFile(at("a.txt"), "the cat sat on the mat.");
    const { code, out } = await run(["prepare", "-i", at("a.txt"), "-o", at("a.bin"), "--tokenizer", TINY_TOKENIZER_DIR]);
    expect(code).toBe(0);
    expect(out).toMatch(/\(tokenizer tiny-bpe-tokenizer@sha256:[0-9a-f]{16}, vocab 277, validation 0\.01\)/);
    expect(await readDataSidecar(at("a.bin"))).toMatchObject({ tokenizer: expect.stringMatching(/^tiny-bpe-tokenizer@sha256:/), tokenizer_path: TINY_TOKENIZER_DIR, tokens: 13 }); // <|endoftext|>, then t he Ġc at Ġs at Ġ on Ġthe Ġm at .
  });

  it("refuses an unknown tokenizer and a bad validation fraction", async () => {
    await writeFile(at("a.txt"), "text");
    const tok = await run(["prepare", "-i", at("a.txt"), "-o", at("o.bin"), "--tokenizer", "llama"]);
    expect(tok.code).toBe(1);
    expect(tok.err).toMatch(/ConfigError in --tokenizer: unknown tokenizer "llama": not a built-in tokenizer, and no such file or folder\n.*use one of gpt2, cl100k, o200k, bytes, the path of a Hugging Face tokenizer folder/);
    const val = await run(["prepare", "-i", at("a.txt"), "-o", at("o.bin"), "--val", "1.5"]);
    expect(val.code).toBe(1);
    expect(val.err).toMatch(/expected a fraction in \[0, 1\)/);
    const missing = await run(["prepare", "-i", at("a.txt")]);
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/required option '-o, --output <file.bin>' not specified/);
  });

  it("stops on Ctrl-C with exit code 130 and leaves no file behind", async () => {
    await writeFile(at("big.txt"), "The quick brown fox jumps over the lazy dog.\n".repeat(200_000));
    await writeFile(at("o.bin"), "previous");
    const listenersBefore = process.listenerCount("SIGINT");
    let sent = false;
    const { code, err, out } = await run(["prepare", "-i", at("big.txt"), "-o", at("o.bin"), "--overwrite"], () => {
      if (!sent) {
        sent = true;
        process.emit("SIGINT", "SIGINT");
      }
    });
    expect(code).toBe(130);
    expect(out).toBe("");
    expect(err).toMatch(/interrupted by SIGINT; nothing was written/);
    expect((await readdir(dir)).sort()).toEqual(["big.txt", "o.bin"]);
    expect(await readFile(at("o.bin"), "utf8")).toBe("previous");
    expect(process.listenerCount("SIGINT")).toBe(listenersBefore);
  });
});
