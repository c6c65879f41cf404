// Types of spin-wait.js (plain JavaScript, shared with the unbundled worker loop), for
// packages that compile this package's sources with checks on (the CLI, the web page).

/** Atomics.load polls between two looks at the clock. */
export declare const POLLS_PER_CLOCK_READ: number;

/** The time to poll before the next wait, given this one's allowance and how long it took, in milliseconds. */
export declare function nextSpinBudget(budgetMs: number, waitedMs: number, maxMs: number): number;

/** One thread's waits on a control block, with the poll time it has learnt. */
export declare class SpinWait {
  constructor(maxSpinMs: number, now?: () => number);
  readonly maxMs: number;
  budgetMs: number;
  /** Waits until view[index] is no longer `value` and returns what it is now. */
  waitWhile(view: Int32Array, index: number, value: number): number;
}
