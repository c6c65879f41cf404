import { expect, it } from "vitest";
import { windowStarts } from "../src/eval/evaluate-loss.js";

it("windows start at 0, T, 2T, … while inputs and next-token targets fit", () => {
  // 33 tokens, T = 8: windows at 0, 8, 16, 24 (the last reads tokens 24..32).
  expect(windowStarts(33, 8)).toEqual([0, 8, 16, 24]);
  expect(windowStarts(32, 8)).toEqual([0, 8, 16]);
  expect(windowStarts(9, 8)).toEqual([0]);
  expect(windowStarts(8, 8)).toEqual([]);
  expect(windowStarts(1000, 8, 3)).toEqual([0, 8, 16]);
});
