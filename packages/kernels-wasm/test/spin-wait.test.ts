import { describe, expect, it } from "vitest";
import { nextSpinBudget, SpinWait } from "../src/spin-wait.js";

// The pool's waiting threads poll for a time that adapts to the waits they see
// (src/spin-wait.js). These cases drive the policy with a fake clock: no thread, no timing.

describe("nextSpinBudget", () => {
  const max = 0.05;

  it("doubles after a wait the longest poll would have met, up to the longest", () => {
    expect(nextSpinBudget(0.01, 0.001, max)).toBe(0.02);
    expect(nextSpinBudget(0.04, 0.05, max)).toBe(max);
    expect(nextSpinBudget(max, 0, max)).toBe(max);
  });

  it("halves after a longer wait, and drops to no polling below a 64th of the longest", () => {
    expect(nextSpinBudget(max, 5, max)).toBe(max / 2);
    expect(nextSpinBudget(max / 32, 5, max)).toBe(max / 64);
    expect(nextSpinBudget(max / 64, 5, max)).toBe(0);
    expect(nextSpinBudget(0, 5, max)).toBe(0);
  });

  it("comes back from no polling after a short wait", () => {
    expect(nextSpinBudget(0, 0.001, max)).toBe(max / 64);
  });

  it("never polls when the longest poll is 0", () => {
    expect(nextSpinBudget(0, 0, 0)).toBe(0);
    expect(nextSpinBudget(0, 1, 0)).toBe(0);
  });
});

/**
 * A clock that moves `step` ms at each read and stores `to` into view[0] at read number
 * `changeAt` (the first read is 1): the waited-for change, without a second thread.
 */
function scriptedClock(view: Int32Array, step: number, changeAt: number, to: number) {
  let t = 0;
  let reads = 0;
  return () => {
    reads++;
    if (reads === changeAt) Atomics.store(view, 0, to);
    return (t += step);
  };
}

describe("SpinWait", () => {
  it("returns at once, learning nothing, when the value has already changed", () => {
    const view = new Int32Array(new SharedArrayBuffer(4));
    view[0] = 3;
    const w = new SpinWait(0.05, () => {
      throw new Error("no clock needed");
    });
    expect(w.waitWhile(view, 0, 2)).toBe(3);
    expect(w.budgetMs).toBe(0.05);
  });

  it("stops polling within a few waits that outlast it, and polls again once waits are short", () => {
    const view = new Int32Array(new SharedArrayBuffer(4));
    // Each clock read 1 ms and the value changes at the second, where the poll finds its time
    // up: every wait outlasts the 0.05 ms poll and goes to Atomics.wait (which returns at once).
    let clockStep = 1;
    const changeAt = 2;
    let value = 0;
    let clock = scriptedClock(view, clockStep, changeAt, value + 1);
    const w = new SpinWait(0.05, () => clock());
    const waitOnce = () => {
      clock = scriptedClock(view, clockStep, changeAt, value + 1);
      expect(w.waitWhile(view, 0, value)).toBe(value + 1);
      value++;
    };
    const budgets: number[] = [];
    for (let i = 0; i < 8; i++) {
      waitOnce();
      budgets.push(w.budgetMs);
    }
    expect(budgets.slice(0, 3)).toEqual([0.025, 0.0125, 0.00625]);
    expect(budgets.at(-1)).toBe(0);

    // Short waits: the value changes 1 us after the wait began.
    clockStep = 0.001;
    const back: number[] = [];
    for (let i = 0; i < 8; i++) {
      waitOnce();
      back.push(w.budgetMs);
    }
    expect(back[0]).toBeCloseTo(0.05 / 64, 12);
    expect(back.at(-1)).toBe(0.05);
  });
});
