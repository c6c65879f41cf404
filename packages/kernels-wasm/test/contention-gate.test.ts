import { describe, expect, it } from "vitest";
import { ContentionGate } from "../src/contention-gate.js";

// When the pool stops waking its workers on a busy machine and when it tries them
// again (src/contention-gate.ts), driven with made-up call times: no thread, no timing.

const G = ContentionGate;
/** Runs one call through the gate; returns whether it ran on the calling thread. */
function call(gate: ContentionGate, stalled: boolean): boolean {
  if (gate.takeInline()) return true;
  gate.afterCall(1, stalled ? 0.9 : 0.01);
  return false;
}

describe("ContentionGate", () => {
  it("keeps waking the workers on calls that do not stall, and on rare stalls", () => {
    const gate = new ContentionGate();
    for (let i = 0; i < 10_000; i++) expect(call(gate, i % 10 === 0)).toBe(false);
  });

  it("counts a call as stalled only when over half of it, and over STALL_MS, went in waiting", () => {
    const gate = new ContentionGate();
    gate.afterCall(1, 0.4);
    gate.afterCall(0.3, 0.19);
    expect(gate.stalledShare).toBe(0);
    gate.afterCall(1, 0.6);
    expect(gate.stalledShare).toBe(G.WEIGHT);
  });

  it("runs on the calling thread once stalls are common, probes, and backs off while probes stall", () => {
    const gate = new ContentionGate();
    let calls = 0;
    while (!call(gate, true)) calls++;
    expect(calls).toBe(5); // 1 - (15/16)^5 > 1/4
    let inline = 1;
    while (call(gate, true)) inline++;
    expect(inline).toBe(G.MIN_INLINE_CALLS);
    // The probe: PROBE_CALLS calls with workers (this one included), all stalled.
    for (let i = 1; i < G.PROBE_CALLS; i++) expect(call(gate, true)).toBe(false);
    let second = 0;
    while (call(gate, true)) second++;
    expect(second).toBe(2 * G.MIN_INLINE_CALLS);
  });

  it("goes back to the workers after a probe that does not stall", () => {
    const gate = new ContentionGate();
    while (!call(gate, true));
    while (call(gate, true));
    for (let i = 1; i < G.PROBE_CALLS; i++) call(gate, false);
    expect(gate.stalledShare).toBe(0);
    for (let i = 0; i < 1000; i++) expect(call(gate, false)).toBe(false);
  });

  it("stays on the calling thread at most MAX_INLINE_CALLS calls at a time", () => {
    const gate = new ContentionGate();
    let longest = 0;
    let run = 0;
    for (let i = 0; i < 100_000; i++) {
      if (call(gate, true)) longest = Math.max(longest, ++run);
      else run = 0;
    }
    expect(longest).toBe(G.MAX_INLINE_CALLS);
  });
});
