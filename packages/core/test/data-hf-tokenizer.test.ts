import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CheckpointError, ConfigError, DataError } from "@kiln/contract";
import { openTokenizer, tokenizerOfCheckpoint } from "../src/data/open-tokenizer.js";
import { sameTokenizer } from "../src/data/tokenizer-files.js";
import { tokenizeFiles } from "../src/data/tokenize-files.js";
import { META_TOKENIZER, META_TOKENIZER_FILES } from "../src/checkpoint/checkpoint-keys.js";
import { TINY_GPT2, randomWeights, writeKilnCheckpoint } from "./support/hf-folders.js";
import { TINY_TOKENIZER_DIR } from "./support/tiny-tokenizer.js";

const TEXT = "the cat sat on the mat. Über ünïcode";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "kiln-hf-tokenizer-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("Hugging Face tokenizer folders", () => {
  it("encode and decode through tokenizer.json; the identity is the folder's name and tokenizer.json's hash", async () => {
    const t = await openTokenizer(TINY_TOKENIZER_DIR);
    expect(t.name).toMatch(/^tiny-bpe-tokenizer@sha256:[0-9a-f]{16}$/);
    expect(t.vocabSize).toBe(277);
    expect(t.endOfText).toBe(276);
    expect(t.location).toBe(TINY_TOKENIZER_DIR);
    const ids = t.encode(TEXT);
    expect(ids.slice(0, 6)).toEqual([116, 257, 266, 265, 262, 265]); // t he Ġc at Ġs at: the merges apply
    expect(t.decode(ids)).toBe(TEXT);
    expect(Object.keys(t.files!).sort()).toEqual(["tokenizer.json", "tokenizer_config.json"]);
    // The tokenizer.json file itself names the same tokenizer.
    expect((await openTokenizer(path.join(TINY_TOKENIZER_DIR, "tokenizer.json"))).name).toBe(t.name);
  });

  it("two copies of one tokenizer.json are the same tokenizer; another tokenizer.json or a built-in one is not", async () => {
    const copy = path.join(dir, "copy");
    await cp(TINY_TOKENIZER_DIR, copy, { recursive: true });
    const a = await openTokenizer(TINY_TOKENIZER_DIR);
    const b = await openTokenizer(copy);
    expect(b.name).not.toBe(a.name);
    expect(sameTokenizer(a.name, b.name)).toBe(true);
    const json = JSON.parse(await readFile(path.join(copy, "tokenizer.json"), "utf8"));
    json.model.merges.pop();
    await writeFile(path.join(copy, "tokenizer.json"), JSON.stringify(json));
    expect(sameTokenizer(a.name, (await openTokenizer(copy)).name)).toBe(false);
    expect(sameTokenizer(a.name, "gpt2")).toBe(false);
    expect(sameTokenizer("gpt2", "gpt2")).toBe(true);
    expect(sameTokenizer("gpt2", "bytes")).toBe(false);
  });

  it("kiln prepare's tokenizeFiles records the identity and the folder; each document starts with BOS", async () => {
    const input = path.join(dir, "a.txt");
    await writeFile(input, TEXT);
    const out = path.join(dir, "a.bin");
    const t = await openTokenizer(TINY_TOKENIZER_DIR);
    const sidecar = await tokenizeFiles({ files: [input], output: out, tokenizer: t });
    expect(sidecar).toMatchObject({ tokenizer: t.name, tokenizer_path: TINY_TOKENIZER_DIR, vocab_size: 277 });
    const bytes = await readFile(out);
    expect(Array.from(new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4))).toEqual([276, ...t.encode(TEXT)]);
  });

  it("a checkpoint's identity and files give the tokenizer back; files that do not match the identity are refused", async () => {
    const t = await openTokenizer(TINY_TOKENIZER_DIR);
    const back = await tokenizerOfCheckpoint(t.name, JSON.stringify(t.files), "c.safetensors");
    expect(back.encode(TEXT)).toEqual(t.encode(TEXT));
    expect((await tokenizerOfCheckpoint("gpt2", undefined, "c.safetensors")).name).toBe("gpt2");
    const wrong = await tokenizerOfCheckpoint("other@sha256:0000000000000000", JSON.stringify(t.files), "c.safetensors").catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(CheckpointError);
    const missing = await tokenizerOfCheckpoint(t.name, undefined, "c.safetensors").catch((e: unknown) => e);
    expect((missing as CheckpointError).message).toContain("does not hold its files");
  });

  it("a kiln checkpoint names its tokenizer: a folder tokenizer's files come from it, a built-in one by name", async () => {
    const t = await openTokenizer(TINY_TOKENIZER_DIR);
    const withFiles = path.join(dir, "hf.safetensors");
    await writeKilnCheckpoint(withFiles, TINY_GPT2, randomWeights(TINY_GPT2), { [META_TOKENIZER]: t.name, [META_TOKENIZER_FILES]: JSON.stringify(t.files) });
    expect((await openTokenizer(withFiles)).encode(TEXT)).toEqual(t.encode(TEXT));
    const builtin = path.join(dir, "gpt2.safetensors");
    await writeKilnCheckpoint(builtin, TINY_GPT2, randomWeights(TINY_GPT2));
    expect((await openTokenizer(builtin)).name).toBe("gpt2");
  });

  it("refuses an unknown name, a folder without tokenizer.json and a tokenizer.json that is not JSON, naming each", async () => {
    const unknown = await openTokenizer("gpt5").catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(ConfigError);
    expect((unknown as ConfigError).message).toBe('unknown tokenizer "gpt5": not a built-in tokenizer, and no such file or folder');
    const empty = await openTokenizer(dir).catch((e: unknown) => e);
    expect(empty).toBeInstanceOf(DataError);
    expect((empty as DataError).message).toBe("the folder has no tokenizer.json");
    expect((empty as DataError).where).toBe(dir);
    await writeFile(path.join(dir, "tokenizer.json"), "{ not json");
    const bad = await openTokenizer(dir).catch((e: unknown) => e);
    expect((bad as DataError).message).toMatch(/^tokenizer\.json is not valid JSON/);
    expect((bad as DataError).where).toBe(path.join(dir, "tokenizer.json"));
  });
});
