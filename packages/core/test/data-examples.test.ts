import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { BatchSampler, ChatTemplate, EXAMPLE_START, TRAINED, exampleMaskPath, openTokenDataset, openTokenizer, prepareExamples, type Tokenizer } from "../src/data/index.js";
import { dataRefusal as refusal, tempDir } from "./data-fixtures.js";

const CHAT = path.join(import.meta.dirname, "fixtures", "chat");
const expected = JSON.parse(await readFile(path.join(CHAT, "expected.json"), "utf8")) as { conversations: { input_ids: number[]; assistant_masks: number[] }[] };
const tokenizer = await openTokenizer(path.join(CHAT, "tokenizer"));

async function prepared(files: string[], options: { seqLen?: number; longExamples?: "truncate" | "drop"; tokenizer?: Tokenizer; valFraction?: number } = {}) {
  const dir = await tempDir();
  const output = path.join(dir, "examples.bin");
  const result = await prepareExamples({ files, output, tokenizer: options.tokenizer ?? tokenizer, valFraction: options.valFraction ?? 0, ...options });
  const bytes = await readFile(output);
  const ids = Array.from(new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4));
  const mask = Array.from(await readFile(exampleMaskPath(output)));
  return { ...result, output, ids, mask, dir };
}

async function writeRows(rows: unknown[], name = "rows.jsonl"): Promise<string> {
  const file = path.join(await tempDir(), name);
  await writeFile(file, rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
  return file;
}

describe("kiln prepare's example rows", () => {
  it("renders chat rows with the tokenizer's template into transformers' tokens, training what its assistant mask marks", async () => {
    const r = await prepared([path.join(CHAT, "chat.jsonl")]);
    expect(r.formats).toEqual(["chat"]);
    expect(r.ids).toEqual(expected.conversations.flatMap((c) => c.input_ids));
    expect(r.mask.map((b) => b & TRAINED)).toEqual(expected.conversations.flatMap((c) => c.assistant_masks));
    // Each conversation's first token starts an example, and no other.
    const starts = expected.conversations.map((_, i) => expected.conversations.slice(0, i).reduce((n, c) => n + c.input_ids.length, 0));
    expect(r.mask.flatMap((b, i) => (b & EXAMPLE_START ? [i] : []))).toEqual(starts);
    expect(r.sidecar.examples).toBe(4);
    expect(r.sidecar.trained_tokens).toBe(expected.conversations.reduce((n, c) => n + c.assistant_masks.filter(Boolean).length, 0));
  });

  it("reads the same rows from Parquet (pyarrow, snappy) into the same tokens and mask", async () => {
    const jsonl = await prepared([path.join(CHAT, "chat.jsonl")]);
    const parquet = await prepared([path.join(CHAT, "chat.parquet")]);
    expect(parquet.ids).toEqual(jsonl.ids);
    expect(parquet.mask).toEqual(jsonl.mask);
  });

  it("trains only the completion of instruct rows, and the end token after it", async () => {
    const r = await prepared([path.join(CHAT, "instruct.jsonl")]);
    expect(r.formats).toEqual(["instruct"]);
    const eos = tokenizer.eos!;
    const completion = tokenizer.encode("chat");
    // The first row: the separator, the prompt untrained, then the completion and the end token trained.
    const prompt = tokenizer.encode("Translate to French: cat\n");
    const first = [tokenizer.endOfText!, ...prompt, ...completion, eos];
    expect(r.ids.slice(0, first.length)).toEqual(first);
    expect(r.mask.slice(0, first.length).map((b) => b & TRAINED)).toEqual([0, ...prompt.map(() => 0), ...completion.map(() => 1), 1]);
    // Alpaca's rows: the instruction and its input, each followed by a blank line.
    const third = tokenizer.encode("Add the numbers.\n\n2 and 3\n\n");
    const start = r.mask.flatMap((b, i) => (b & EXAMPLE_START ? [i] : []))[2];
    expect(r.ids.slice(start + 1, start + 1 + third.length)).toEqual(third);
  });

  it("trains every token of text rows", async () => {
    const file = await writeRows([{ text: "one two three" }, { text: "four" }]);
    const r = await prepared([file]);
    expect(r.formats).toEqual(["text"]);
    // Each row: the separator (starts the example, not trained), then its text, trained.
    const second = r.mask.findIndex((b, i) => i > 0 && b & EXAMPLE_START);
    expect(r.mask).toEqual([EXAMPLE_START, ...Array(second - 1).fill(TRAINED), EXAMPLE_START, ...Array(r.ids.length - second - 1).fill(TRAINED)]);
    expect(r.sidecar.trained_tokens).toBe(r.ids.length - 2);
  });

  it("cuts or drops examples longer than --seq-len + 1 tokens, and drops one left with nothing to train", async () => {
    const long = [{ role: "user", content: "a b c d e f g h i j k l m n o p" }, { role: "assistant", content: "q r s t" }];
    const short = [{ role: "user", content: "x" }, { role: "assistant", content: "y" }];
    const file = await writeRows([{ messages: short }, { messages: long }]);
    const whole = await prepared([file]);
    const firstLength = whole.mask.findIndex((b, i) => i > 0 && b & EXAMPLE_START);
    const seqLen = firstLength + 1; // the short one fits; the long one's prompt alone is longer
    const truncated = await prepared([file], { seqLen });
    expect([truncated.truncated, truncated.dropped, truncated.sidecar.examples]).toEqual([1, 1, 1]);
    const dropped = await prepared([file], { seqLen, longExamples: "drop" });
    expect([dropped.truncated, dropped.dropped, dropped.ids]).toEqual([0, 1, truncated.ids]);
    const roomy = await prepared([file], { seqLen: whole.ids.length - firstLength - 2 });
    expect([roomy.truncated, roomy.dropped, roomy.sidecar.examples]).toEqual([1, 0, 2]);
    expect(roomy.ids).toEqual(whole.ids.slice(0, -1));
  });
});

describe("refusals of bad example rows, naming the file and line", () => {
  it("an unknown role, a missing content, a line that is not JSON, a row of no known shape", async () => {
    const ok = { role: "assistant", content: "fine" };
    let e = await refusal(prepared([await writeRows([{ messages: [ok] }, { messages: [{ role: "bot", content: "hi" }, ok] }])]));
    expect(e.message).toMatch(/messages\[0\]\.role is "bot"; a role is one of system, user, assistant/);
    expect(e.where).toBe("rows.jsonl:2");
    e = await refusal(prepared([await writeRows([{ messages: [{ role: "user" }, ok] }])]));
    expect(e.message).toMatch(/messages\[0\] \(user\) has no "content"/);
    expect(e.where).toBe("rows.jsonl:1");
    const broken = path.join(await tempDir(), "broken.jsonl");
    await writeFile(broken, `${JSON.stringify({ text: "a" })}\n{"text": oops}\n`);
    e = await refusal(prepared([broken]));
    expect(e.message).toMatch(/not valid JSON/);
    expect(e.where).toBe(`${broken}:2`);
    e = await refusal(prepared([await writeRows([{ question: "?" }])]));
    expect(e.message).toMatch(/cannot tell the example format from this row \(keys: question\)/);
    e = await refusal(prepared([await writeRows([{ messages: [{ role: "user", content: "q" }] }])]));
    expect(e.message).toMatch(/no assistant message/);
  });

  it("a template that fails to render, one that rewrites earlier turns, and chat rows without a template", async () => {
    const dir = await tempDir();
    const rows = await writeRows([{ messages: [{ role: "user", content: "q" }, { role: "assistant", content: "a" }] }]);
    const raising = path.join(dir, "raising.jinja");
    await writeFile(raising, "{% for m in messages %}{% if m['role'] == 'user' %}{{ raise_exception('users are not allowed') }}{% endif %}{{ m['content'] }}{% endfor %}");
    let e = await refusal(prepareExamples({ files: [rows], output: path.join(dir, "x.bin"), tokenizer, chatTemplate: await ChatTemplate.fromFile(raising, tokenizer.files) }));
    expect(e.message).toMatch(/fails to render this conversation \(.*users are not allowed/);
    expect(e.where).toBe("rows.jsonl:1");
    const rewriting = path.join(dir, "rewriting.jinja");
    await writeFile(rewriting, "{{ messages | length }}{% for m in messages %}{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}>{% endif %}");
    e = await refusal(prepareExamples({ files: [rows], output: path.join(dir, "y.bin"), tokenizer, chatTemplate: await ChatTemplate.fromFile(rewriting, tokenizer.files) }));
    expect(e.message).toMatch(/does not render the conversation up to message 1 as the start of the whole/);
    e = await refusal(prepareExamples({ files: [rows], output: path.join(dir, "z.bin"), tokenizer: await openTokenizer("bytes") }));
    expect(e.message).toMatch(/chat rows need a chat template, and the tokenizer bytes has none/);
    expect(e.hint).toMatch(/--chat-template FILE/);
  });
});

describe("training rows of an example file", () => {
  it("hold one example each from its start, padded, with targets only where the mask trains", async () => {
    const r = await prepared([path.join(CHAT, "chat.jsonl")], { valFraction: 0.25 });
    const data = await openTokenDataset(r.output, { vocabSize: tokenizer.vocabSize });
    expect(data.examples?.count).toBe(4);
    const seqLen = 30;
    const train = new BatchSampler(data, { batchSize: 3, seqLen, seed: 1, valFraction: 0.25, shuffle: false });
    const val = new BatchSampler(data, { batchSize: 1, seqLen, seed: 1, valFraction: 0.25, shuffle: false });
    const valOnly = new BatchSampler(data, { batchSize: 1, seqLen, seed: 1, valFraction: 0.25, split: "val", shuffle: false });
    expect([train.windowCount, valOnly.windowCount, val.windowCount]).toEqual([3, 1, 3]);
    const batch = await train.next();
    for (let row = 0; row < 3; row++) {
      const c = expected.conversations[row];
      const n = Math.min(c.input_ids.length, seqLen + 1);
      const ids = Array.from(batch.ids.subarray(row * seqLen, (row + 1) * seqLen));
      const targets = Array.from(batch.targets.subarray(row * seqLen, (row + 1) * seqLen));
      expect(ids).toEqual([...c.input_ids.slice(0, n - 1), ...Array(seqLen - n + 1).fill(0)]);
      expect(targets).toEqual([...c.input_ids.slice(1, n).map((id, j) => (c.assistant_masks[j + 1] ? id : -1)), ...Array(seqLen - n + 1).fill(-1)]);
    }
    // The second conversation (44 tokens) is cut to the row's 31.
    expect(train.examplesCut()).toBe(1);
    const v = await valOnly.next();
    const last = expected.conversations[3];
    expect(Array.from(v.ids.subarray(0, last.input_ids.length - 1))).toEqual(last.input_ids.slice(0, -1));
    await data.close();
  });

  it("packed (pack): consecutive examples fill each row at the positions they take alone, docStarts saying where each begins", async () => {
    const r = await prepared([path.join(CHAT, "chat.jsonl")], { valFraction: 0 });
    const data = await openTokenDataset(r.output, { vocabSize: tokenizer.vocabSize });
    const seqLen = 64;
    const packed = new BatchSampler(data, { batchSize: 1, seqLen, seed: 1, valFraction: 0, shuffle: false, pack: true });
    const alone = new BatchSampler(data, { batchSize: 1, seqLen, seed: 1, valFraction: 0, shuffle: false });
    // Each example takes its length less one position (at most seqLen); rows take them in order while they fit.
    const takes = expected.conversations.map((c) => Math.min(c.input_ids.length, seqLen + 1) - 1);
    const rows: number[][] = [];
    for (const [e, n] of takes.entries()) {
      const last = rows.at(-1);
      if (last && last.reduce((s, i) => s + takes[i], 0) + n <= seqLen) last.push(e);
      else rows.push([e]);
    }
    expect(rows.length).toBeLessThan(4);
    expect(packed.packing).toEqual({ examples: 4, rows: rows.length });
    expect(packed.windowCount).toBe(rows.length);
    const singles = [];
    for (let e = 0; e < 4; e++) singles.push(await alone.next());
    for (const row of rows) {
      const b = await packed.next();
      let at = 0;
      for (const e of row) {
        const n = takes[e];
        expect(Array.from(b.ids.subarray(at, at + n))).toEqual(Array.from(singles[e].ids.subarray(0, n)));
        expect(Array.from(b.targets.subarray(at, at + n))).toEqual(Array.from(singles[e].targets.subarray(0, n)));
        expect(Array.from(b.docStarts!.subarray(at, at + n))).toEqual(Array(n).fill(at));
        at += n;
      }
      expect(Array.from(b.targets.subarray(at))).toEqual(Array(seqLen - at).fill(-1));
      expect(Array.from(b.docStarts!.subarray(at))).toEqual(Array(seqLen - at).fill(at));
    }
    await data.close();
  });

  it("refuses a mask that does not fit its token file, naming the mask", async () => {
    const r = await prepared([path.join(CHAT, "chat.jsonl")]);
    const mask = exampleMaskPath(r.output);
    await writeFile(mask, (await readFile(mask)).subarray(1));
    let e = await refusal(openTokenDataset(r.output, { vocabSize: tokenizer.vocabSize }));
    expect(e.message).toMatch(/the loss mask holds 105 bytes but examples\.bin holds 106 tokens/);
    expect(e.where).toBe(mask);
    await writeFile(mask, new Uint8Array(106).fill(7));
    e = await refusal(openTokenDataset(r.output, { vocabSize: tokenizer.vocabSize }));
    expect(e.message).toMatch(/byte 0 of the loss mask is 7/);
  });
});
