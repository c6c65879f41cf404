import { copyFile, mkdir, readFile } from "node:fs/promises";
import path from "node:path";
import { deflateSync, gzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { expectRefused, treeChanges } from "./support/expectations.js";
import { REPO_ROOT } from "./support/paths.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// kiln prepare takes what a corpus folder holds as it is found: compressed text is read
// through, files that are not text are named and skipped (refused with --strict), and an
// output that exists is kept unless --overwrite. nanoGPT's 16-bit token files are named as
// such by kiln train and widened by `kiln prepare --from-u16`.

/** story.txt and its .zst and .xz, made with zstd -19 and xz -9 (zstd 1.5.4, xz 5.4.1). */
const FIXTURES = path.join(REPO_ROOT, "packages", "cli", "test", "fixtures", "compressed-text");

/** A 1x1 grey PNG: signature, IHDR, IDAT, IEND (PNG specification, 5.2-5.6). */
function tinyPng(): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b: Buffer) => {
    let c = 0xffffffff;
    for (const x of b) c = crcTable[(c ^ x) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc(body), 8 + data.length);
    return out;
  };
  const ihdr = Buffer.from([0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0]);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr), chunk("IDAT", deflateSync(Buffer.from([0, 0x80]))), chunk("IEND", Buffer.alloc(0))]);
}

let ws: Workspace;
beforeEach(async () => {
  ws = await Workspace.create("prepare-inputs");
});
afterEach(() => ws.remove());

async function corpusWithGzipAndPng(): Promise<void> {
  await mkdir(ws.path("corpus"));
  await ws.write("corpus/a.txt", "Once upon a time, a small fox lived by a river.\n");
  await ws.write("corpus/b.txt.gz", gzipSync(Buffer.from("Every morning the fox ran to the water and looked at the fish.\n")));
  await ws.write("corpus/photo.png", tinyPng());
}

const tokensOf = async (file: string) => readFile(ws.path(file));

describe("kiln prepare's inputs", () => {
  it("reads a .gz file as its text, and skips a PNG, naming it, with a count", async () => {
    await corpusWithGzipAndPng();
    const r = expectSuccess(await ws.run(["prepare", "-i", "corpus", "-o", "data/corpus.bin", "--tokenizer", "bytes"]), "prepare");
    expect(r.stdout).toMatch(/^wrote data\/corpus\.bin: 111 tokens from 2 files, 1 skipped as not text \(tokenizer bytes, vocab 256, validation 0\.01\)/);
    expect(r.stderr).toContain("kiln prepare: skipped 1 of 3 input files, which is not text (--strict refuses them instead):\n  corpus/photo.png: a PNG image\n");
    expect(r.stderr).toMatch(/tokenizing 2 files/);
    const sidecar = JSON.parse(await readFile(ws.path("data/corpus.bin.json"), "utf8")) as { sources: string[] };
    expect(sidecar.sources).toEqual(["corpus/a.txt", "corpus/b.txt.gz"]);
    const ids = [...new Uint32Array((await tokensOf("data/corpus.bin")).buffer.slice(0))];
    expect(Buffer.from(ids).toString("utf8")).toBe("Once upon a time, a small fox lived by a river.\nEvery morning the fox ran to the water and looked at the fish.\n");
  });

  it("with --strict, refuses the PNG, naming it and what it is, and writes nothing", async () => {
    await corpusWithGzipAndPng();
    const before = await ws.snapshot();
    expectRefused(await ws.run(["prepare", "-i", "corpus", "-o", "data/corpus.bin", "--strict"]), {
      kind: "DataError",
      where: "corpus/photo.png",
      message: /^input file is not text: a PNG image$/,
      hint: /Leave it out of the input .*or convert it to UTF-8 text/,
    });
    expect(treeChanges(before, await ws.snapshot())).toEqual([]);
  });

  it("tokenizes .gz, .zst and .xz text to the same ids as the plain file", async () => {
    await copyFile(path.join(FIXTURES, "story.txt"), ws.path("story.txt"));
    await ws.write("story.txt.gz", gzipSync(await readFile(ws.path("story.txt"))));
    for (const ext of ["zst", "xz"]) await copyFile(path.join(FIXTURES, `story.txt.${ext}`), ws.path(`story.txt.${ext}`));
    expectSuccess(await ws.run(["prepare", "-i", "story.txt", "-o", "plain.bin"]), "prepare plain");
    const plain = await tokensOf("plain.bin");
    expect(plain.byteLength).toBeGreaterThan(1000);
    for (const ext of ["gz", "zst", "xz"]) {
      const r = expectSuccess(await ws.run(["prepare", "-i", `story.txt.${ext}`, "-o", `${ext}.bin`]), `prepare .${ext}`);
      expect(r.stdout).toMatch(/ from 1 file, 0 skipped \(tokenizer gpt2/);
      expect((await tokensOf(`${ext}.bin`)).equals(plain), `.${ext}`).toBe(true);
    }
  });

  it("treats a .gz holding binary data as binary, and a damaged .gz as an error naming it", async () => {
    await ws.write("text.txt", "Some text.\n");
    await ws.write("floats.gz", gzipSync(Buffer.from(new Float32Array([1.5, -2, 3.25, 0, 7]).buffer)));
    const skipped = expectSuccess(await ws.run(["prepare", "-i", "text.txt", "floats.gz", "-o", "o.bin"]), "prepare");
    expect(skipped.stderr).toMatch(/^ {2}floats\.gz: a gzip-compressed file holding binary data \(it holds NUL bytes/m);

    await ws.write("cut.gz", gzipSync(Buffer.from("Some text that will be cut short. ".repeat(200))).subarray(0, 60));
    expectRefused(await ws.run(["prepare", "-i", "cut.gz", "-o", "cut.bin"]), {
      kind: "DataError",
      where: "cut.gz",
      message: /^input file is gzip-compressed but cannot be decompressed: the data is cut short$/,
      hint: /gzip -t/,
    });
  });

  it("keeps an existing output unless --overwrite, naming it and the two ways on", async () => {
    await ws.write("a.txt", "First text.\n");
    await ws.write("b.txt", "Second, longer text.\n");
    expectSuccess(await ws.run(["prepare", "-i", "a.txt", "-o", "data.bin", "--tokenizer", "bytes"]), "first prepare");
    const before = await ws.snapshot();
    expectRefused(await ws.run(["prepare", "-i", "b.txt", "-o", "data.bin", "--tokenizer", "bytes"]), {
      kind: "DataError",
      where: "data.bin",
      message: /^the output file already exists; kiln prepare does not replace it unasked$/,
      hint: /^Pass --overwrite to replace the token file and its sidecar, or name another output with -o\.\n$/,
    });
    expect(treeChanges(before, await ws.snapshot())).toEqual([]);

    const r = expectSuccess(await ws.run(["prepare", "-i", "b.txt", "-o", "data.bin", "--tokenizer", "bytes", "--overwrite"]), "prepare --overwrite");
    expect(r.stdout).toMatch(/^wrote data\.bin: 21 tokens from 1 file/);
    expect((await tokensOf("data.bin")).byteLength).toBe(21 * 4);
    expect(JSON.parse(await readFile(ws.path("data.bin.json"), "utf8"))).toMatchObject({ tokens: 21, sources: ["b.txt"] });
  });

  it("refuses an output whose sidecar alone exists", async () => {
    await ws.write("a.txt", "Text.\n");
    await ws.write("data.bin.json", "{}");
    expectRefused(await ws.run(["prepare", "-i", "a.txt", "-o", "data.bin"]), {
      kind: "DataError",
      where: "data.bin.json",
      message: /^the output's sidecar already exists/,
      hint: /--overwrite/,
    });
  });
});

describe("16-bit token files (nanoGPT's train.bin)", () => {
  /** textTokens' byte ids as little-endian uint16, as nanoGPT's prepare.py writes them. */
  const u16File = (count: number) => {
    const ids = textTokens(count);
    const bytes = Buffer.alloc(count * 2);
    ids.forEach((id, i) => bytes.writeUInt16LE(id, i * 2));
    return bytes;
  };

  it("kiln train names one as such, with the command that converts it; the converted file trains", { timeout: 120_000 }, async () => {
    await ws.writeConfig("tiny.yaml");
    await ws.write("train.bin", u16File(3000)); // 6000 bytes: a multiple of 4, so read as u32 its ids are pairs
    await ws.write("odd.bin", u16File(3001)); // 6002 bytes: not a multiple of 4

    expectRefused(await ws.run(["train", "-f", "tiny.yaml", "-d", "train.bin", "--headless"]), {
      kind: "DataError",
      where: "train.bin",
      message: /^train\.bin: this looks like 16-bit token ids \(nanoGPT's format\), not kiln's 32-bit ones: read as 32-bit ids, id \d+ at position 0 is not below the model's vocab_size 256; read as 16-bit, it holds 3000 ids, the largest 121$/,
      hint: /^Convert it to a u32 token file and train on that: kiln prepare --from-u16 train\.bin -o train-u32\.bin\n$/,
    });
    expectRefused(await ws.run(["train", "-f", "tiny.yaml", "-d", "odd.bin", "--headless"]), {
      kind: "DataError",
      where: "odd.bin",
      message: /this looks like 16-bit token ids \(nanoGPT's format\).*its size, 6002 bytes, is not a multiple of 4/,
      hint: /kiln prepare --from-u16 odd\.bin -o odd-u32\.bin/,
    });

    const converted = expectSuccess(await ws.run(["prepare", "--from-u16", "train.bin", "-o", "train-u32.bin", "--tokenizer", "bytes"]), "prepare --from-u16");
    expect(converted.stdout).toMatch(/^wrote train-u32\.bin: 3,000 tokens from train\.bin's 16-bit ids \(tokenizer bytes, vocab 256, validation 0\.01\); sidecar train-u32\.bin\.json\n$/);
    expect([...new Uint32Array((await tokensOf("train-u32.bin")).buffer.slice(0))]).toEqual([...textTokens(3000)]);
    expect(JSON.parse(await readFile(ws.path("train-u32.bin.json"), "utf8"))).toEqual({
      tokenizer: "bytes",
      vocab_size: 256,
      tokens: 3000,
      val_fraction: 0.01,
      sources: ["train.bin"],
      format: "u32",
    });

    const trained = expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "train-u32.bin", "--output-dir", "out", "--headless"]), "training on the converted file");
    expect(trained.stdout).toMatch(/"step":4/);
  });

  it("--from-u16 refuses a u32 token file, an odd size, and ids above the tokenizer's vocabulary", async () => {
    await ws.writeTokens("u32.bin", textTokens(500));
    expectRefused(await ws.run(["prepare", "--from-u16", "u32.bin", "-o", "x.bin"]), {
      kind: "DataError",
      where: "u32.bin",
      message: /^u32\.bin does not look like 16-bit token ids/,
      hint: /train on it as it is \(kiln train -d u32\.bin\)/,
    });
    await ws.write("odd.bin", Buffer.alloc(7, 65));
    expectRefused(await ws.run(["prepare", "--from-u16", "odd.bin", "-o", "x.bin"]), {
      kind: "DataError",
      where: "odd.bin",
      message: /size 7 is odd, so it is not a file of 16-bit token ids/,
      hint: /truncated/,
    });
    const big = Buffer.alloc(8);
    [300, 301, 302, 303].forEach((id, i) => big.writeUInt16LE(id, i * 2));
    await ws.write("big.bin", big);
    expectRefused(await ws.run(["prepare", "--from-u16", "big.bin", "-o", "x.bin", "--tokenizer", "bytes"]), {
      kind: "DataError",
      where: "big.bin",
      message: /^token id 300 at position 0 is not below the bytes tokenizer's vocabulary of 256$/,
      hint: /--tokenizer/,
    });
    expect([...(await ws.snapshot()).keys()].sort()).toEqual(["big.bin", "odd.bin", "u32.bin"]);
  });
});

describe("kiln dashboard on a run folder", () => {
  it("refuses a folder that does not exist, suggesting the one that does", async () => {
    await mkdir(ws.path("checkpoints", "nano-start"), { recursive: true });
    expectRefused(await ws.run(["dashboard", "checkpoints/nano-strat", "--port", "0"]), {
      kind: "DataError",
      where: "checkpoints/nano-strat",
      message: /^run folder not found$/,
      hint: /^Did you mean checkpoints\/nano-start\? Pass the output folder of a kiln train run .*create its folder first \(mkdir -p checkpoints\/nano-strat\)/,
    });
  });

  it("waits for a folder that exists but has no metrics.jsonl yet, saying so", async () => {
    await mkdir(ws.path("out"));
    const p = ws.start(["dashboard", "out", "--port", "0"]);
    try {
      await p.until(() => /does not exist yet/.test(p.stderr), "the waiting note", 30_000);
      expect(p.stderr).toMatch(/^kiln dashboard: out\/metrics\.jsonl does not exist yet; waiting for the run to log its first step/m);
      expect(p.stdout).toMatch(/^kiln dashboard: http:\/\/127\.0\.0\.1:\d+\//);
    } finally {
      p.child.kill("SIGTERM");
    }
    const stopped = await p.exited;
    expect(stopped, stopped.stderr).toMatchObject({ code: 0, signal: null });
  });
});
