import { expect, it } from "vitest";
import type { CompiledStep } from "../src/exec/compiled-step.js";
import { ExpertLoad } from "../src/train/expert-load.js";

/** A compiled step whose tensors 10 and 11 hold the given expert offsets. */
const stepWith = (offsets: Record<number, number[]>) =>
  ({
    download: async (id: number, out: Int32Array) => out.set(offsets[id]),
  }) as unknown as CompiledStep;

it("reports the busiest expert's tokens over an even share, the largest over layers and summed over micro-batches", async () => {
  const load = new ExpertLoad([10, 11], 4);
  // Layer 10: 2, 2, 2, 2 (even); layer 11: 1, 0, 4, 3 -> 4 of an even 2.
  await load.add(stepWith({ 10: [0, 2, 4, 6, 8], 11: [0, 1, 1, 5, 8] }));
  expect(load.imbalance()).toBe(2);
  // A second micro-batch evens layer 11 out: 4, 4, 4, 4 over both.
  await load.add(stepWith({ 10: [0, 2, 4, 6, 8], 11: [0, 3, 7, 7, 8] }));
  expect(load.imbalance()).toBe(1);
  load.reset();
  await load.add(stepWith({ 10: [0, 8, 8, 8, 8], 11: [0, 2, 4, 6, 8] }));
  expect(load.imbalance()).toBe(4);
});
