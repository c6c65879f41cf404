import { readFile } from "node:fs/promises";
import path from "node:path";
import { DataError } from "@kiln/contract";
import { errorCode } from "../../fs/errno-table.js";
import { fileReadError } from "../../fs/file-errors.js";

import { EXAMPLE_START, type ExampleIndex, TRAINED } from "./example-mask-bits.js";

export { EXAMPLE_START, type ExampleIndex, TRAINED };

/** `data/chat.bin` -> `data/chat.bin.mask`. */
export function exampleMaskPath(binPath: string): string {
  return `${binPath}.mask`;
}

const HINT = "Re-create the token file, its mask and its sidecar together with `kiln prepare`.";

/** Reads and checks the mask of an example file of `tokenCount` tokens whose sidecar records `examples` examples. */
export async function readExampleIndex(binPath: string, tokenCount: number, examples: number): Promise<ExampleIndex> {
  const file = exampleMaskPath(binPath);
  let mask: Uint8Array;
  try {
    mask = new Uint8Array(await readFile(file));
  } catch (err) {
    if (errorCode(err) === "ENOENT") {
      throw new DataError(`the sidecar of ${path.basename(binPath)} says it holds ${examples} examples, but their loss mask is missing`, { where: file, hint: HINT });
    }
    throw fileReadError(err, file, { what: "loss mask", error: DataError });
  }
  if (mask.length !== tokenCount) {
    throw new DataError(`the loss mask holds ${mask.length} bytes but ${path.basename(binPath)} holds ${tokenCount} tokens (one byte per token)`, { where: file, hint: HINT });
  }
  const starts: number[] = [];
  for (let i = 0; i < mask.length; i++) {
    const b = mask[i];
    if (b > (TRAINED | EXAMPLE_START)) throw new DataError(`byte ${i} of the loss mask is ${b}; only bits 0 (trained) and 1 (example start) are used`, { where: file, hint: HINT });
    if (b & EXAMPLE_START) starts.push(i);
  }
  if (tokenCount > 0 && !(mask[0] & EXAMPLE_START)) throw new DataError("the loss mask's first byte does not start an example", { where: file, hint: HINT });
  if (starts.length !== examples) {
    throw new DataError(`the loss mask marks ${starts.length} examples but the sidecar of ${path.basename(binPath)} says ${examples}`, { where: file, hint: HINT });
  }
  starts.push(tokenCount);
  return { mask, starts: Float64Array.from(starts), count: examples };
}
