/**
 * Whether the pool's next call should wake its workers or run every part on the
 * calling thread, from what the last calls saw.
 *
 * On a machine whose cores other processes keep busy, a worker is often not
 * running: the caller then takes the parts it has not taken (thread-pool.ts), but
 * a worker that was descheduled halfway through a part holds the whole call until
 * the system runs it again, which costs milliseconds, a hundred small calls a
 * training step. A call is counted as stalled when over half of it, and over
 * STALL_MS, went in waiting for a thread that was not running: the caller's wait for
 * workers still inside once it was done, and the waits inside a kernel that ran out
 * their sleep (kiln_wait_timeouts in csrc/matmul.c).
 * When stalled calls become common (a moving average over the last calls above
 * STALLED_SHARE) the pool runs the next calls on the calling thread alone (the
 * same parts, so the same results), then tries its workers again on a few calls:
 * if those still stall, it stays on the calling thread twice as long as before (up
 * to MAX_INLINE_CALLS calls), else it goes back to waking them. On an idle machine
 * calls do not stall, and nothing changes.
 */
export class ContentionGate {
  static readonly STALL_MS = 0.2;
  static readonly STALLED_SHARE = 0.25;
  /** Weight of the latest call in the moving average. */
  static readonly WEIGHT = 1 / 16;
  static readonly MIN_INLINE_CALLS = 64;
  static readonly MAX_INLINE_CALLS = 4096;
  /** Calls with workers after a spell on the calling thread, to see whether they still stall. */
  static readonly PROBE_CALLS = 16;

  /** Moving average of stalled calls (1) and calls that were not (0). */
  stalledShare = 0;
  /** Calls left to run on the calling thread (0: wake the workers). */
  inlineLeft = 0;
  /** The length of the last spell on the calling thread. */
  inlineSpell = 0;
  /** Calls left in the current probe, and those of them that stalled. */
  probeLeft = 0;
  probeStalls = 0;

  /** Whether the next call runs on the calling thread alone; counts it if so. */
  takeInline(): boolean {
    if (this.inlineLeft === 0) return false;
    this.inlineLeft--;
    if (this.inlineLeft === 0) {
      this.probeLeft = ContentionGate.PROBE_CALLS;
      this.probeStalls = 0;
    }
    return true;
  }

  /** After a call with workers: it took `callMs`, of which `stalledMs` waiting for threads that were not running. */
  afterCall(callMs: number, stalledMs: number): void {
    const stalled = stalledMs > ContentionGate.STALL_MS && 2 * stalledMs > callMs;
    if (this.probeLeft > 0) {
      this.probeLeft--;
      if (stalled) this.probeStalls++;
      if (this.probeLeft > 0) return;
      if (this.probeStalls > ContentionGate.STALLED_SHARE * ContentionGate.PROBE_CALLS) {
        this.inlineSpell = Math.min(ContentionGate.MAX_INLINE_CALLS, 2 * this.inlineSpell);
        this.inlineLeft = this.inlineSpell;
      } else {
        this.inlineSpell = 0;
        this.stalledShare = 0;
      }
      return;
    }
    this.stalledShare += ContentionGate.WEIGHT * ((stalled ? 1 : 0) - this.stalledShare);
    if (this.stalledShare > ContentionGate.STALLED_SHARE) {
      this.inlineSpell = ContentionGate.MIN_INLINE_CALLS;
      this.inlineLeft = this.inlineSpell;
    }
  }
}
