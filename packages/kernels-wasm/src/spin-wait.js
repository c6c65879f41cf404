// How a pool thread waits for a slot of the control block to change: it polls for a
// while, then sleeps in Atomics.wait (a futex). Plain JavaScript so that the worker loop
// (thread-worker-loop.js, which runs unbundled in Node) and the pool (thread-pool.ts)
// share it.
//
// Polling answers fastest when the wait is short, but a thread that polls while another
// process needs its core takes time from that process, and from our own thread it waits
// for: on a busy machine the one it waits for is often not running at all. So the time a
// thread polls is bounded by time, not by a count, and adapts to the waits it sees:
// after a wait that a poll of the longest allowed time would have met, the next wait
// polls twice as long (up to that longest); after a longer one, half as long (down to
// nothing beyond one round of polls). An idle machine keeps the longest poll; a busy one
// drops to sleeping almost at once within a few waits, and comes back when waits shorten.

/** Atomics.load polls between two looks at the clock (a clock read costs tens of polls). */
export const POLLS_PER_CLOCK_READ = 32;

/**
 * The time to poll before the next wait, given this one's.
 * @param {number} budgetMs what this wait was allowed to poll
 * @param {number} waitedMs how long it waited in all, polling and asleep
 * @param {number} maxMs the longest poll allowed
 * @returns {number}
 */
export function nextSpinBudget(budgetMs, waitedMs, maxMs) {
  if (waitedMs <= maxMs) return Math.min(maxMs, Math.max(2 * budgetMs, maxMs / 64));
  const half = budgetMs / 2;
  return half < maxMs / 64 ? 0 : half;
}

/** One thread's waits on a control block, with the poll time it has learnt. */
export class SpinWait {
  /**
   * @param {number} maxSpinMs the longest a wait polls before it sleeps (0: sleep at once)
   * @param {() => number} [now] a clock in milliseconds
   */
  constructor(maxSpinMs, now = () => performance.now()) {
    this.maxMs = maxSpinMs;
    this.budgetMs = maxSpinMs;
    this.now = now;
  }

  /**
   * Waits until view[index] is no longer `value` and returns what it is now.
   * @param {Int32Array} view
   * @param {number} index
   * @param {number} value
   * @returns {number}
   */
  waitWhile(view, index, value) {
    let v = Atomics.load(view, index);
    if (v !== value) return v;
    const start = this.now();
    const deadline = start + this.budgetMs;
    for (;;) {
      for (let i = 0; i < POLLS_PER_CLOCK_READ; i++) {
        v = Atomics.load(view, index);
        if (v !== value) {
          this.budgetMs = nextSpinBudget(this.budgetMs, this.now() - start, this.maxMs);
          return v;
        }
      }
      if (this.now() >= deadline) break;
    }
    while (v === value) {
      Atomics.wait(view, index, value);
      v = Atomics.load(view, index);
    }
    this.budgetMs = nextSpinBudget(this.budgetMs, this.now() - start, this.maxMs);
    return v;
  }
}
