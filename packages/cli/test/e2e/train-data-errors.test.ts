import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { expectRefused, treeChanges } from "./support/expectations.js";
import { trainTiny } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// Bad token data is refused before training starts, and an earlier run's output is left as it was.
let trained: Workspace;
let ws: Workspace;
beforeAll(async () => {
  trained = await Workspace.create("data-run");
  await trainTiny(trained, "out");
});
afterAll(() => trained.remove());
beforeEach(async () => {
  ws = await Workspace.copyOf("data", trained);
});
afterEach(() => ws.remove());

async function refuse(data: string) {
  const before = await ws.snapshot();
  expect([...before.keys()]).toContain("out/step_4.safetensors");
  const r = await ws.run(["train", "-f", "tiny.yaml", "-d", data, "--output-dir", "out", "--headless"]);
  expect(treeChanges(before, await ws.snapshot())).toEqual([]);
  return r;
}

describe("kiln train refuses bad token data", () => {
  it("a file whose size is not a multiple of the 4-byte token size", async () => {
    await ws.write("odd.bin", new Uint8Array(4001).fill(65));
    expectRefused(await refuse("odd.bin"), {
      kind: "DataError",
      where: "odd.bin",
      message: /data size 4001 is not a multiple of 4 bytes: not a u32 token file/,
      hint: /little-endian u32 ids, 4 bytes each.*kiln prepare/,
    });
  });

  it("a token id at or above the model's vocab_size", async () => {
    const ids = textTokens(500);
    ids[123] = 300;
    await ws.writeTokens("ids.bin", ids);
    expectRefused(await refuse("ids.bin"), {
      kind: "DataError",
      where: "ids.bin",
      message: /^token id 300 at position 123 is not below the model's vocab_size 256; the largest id in the file is 300/,
      hint: /raise model\.vocab_size \(to at least 301\)/,
    });
  });

  it("an empty file", async () => {
    await ws.write("empty.bin", new Uint8Array(0));
    expectRefused(await refuse("empty.bin"), {
      kind: "DataError",
      where: "empty.bin",
      message: /empty\.bin is empty: a token file needs at least one token/,
      hint: /kiln prepare/,
    });
  });

  it("a file that does not exist", async () => {
    expectRefused(await refuse("nowhere/tokens.bin"), {
      kind: "DataError",
      where: "nowhere/tokens.bin",
      message: /^token file not found/,
      hint: /check the path/i,
    });
  });
});
