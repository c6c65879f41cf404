import { writeFileSync } from "node:fs";
import path from "node:path";
import type { Backend } from "@kiln/contract";
import { StepProfiler, summarizeProfile } from "@kiln/core";
import { chromeTrace } from "./chrome-trace.js";
import { formatProfileTable } from "./profile-table.js";

/** Steps of a run left unprofiled first: the first calls of each kernel (compilation, page faults) are not typical. */
export const PROFILE_WARMUP_STEPS = 2;
/** Steps `--profile` times when it names no count. */
export const PROFILE_DEFAULT_STEPS = 5;

/**
 * `kiln train --profile [n]`: after the first steps this run takes (PROFILE_WARMUP_STEPS,
 * fewer when the run is shorter), times the next n steps, then writes profile.json and
 * trace.json to the output folder and hands back the table; training goes on unprofiled.
 */
export class StepProfiling {
  readonly profiler: StepProfiler;
  /** The first and last step (trainer step counts) to time, fixed when the run's first step comes. */
  private window: { first: number; last: number } | undefined;
  private readonly measured: number[] = [];
  private stepStart = 0;
  private done = false;

  constructor(
    private readonly requested: number,
    private totalSteps: number,
    private readonly backend: Backend,
    private readonly outputDir: string,
    /** The device's peak FLOP/s for the training dtype and memory bandwidth, where known (the table's floor column). */
    private readonly roofline: { peakFlops?: number; memoryBandwidth?: number } = {},
  ) {
    // A GPU's kernels return before they have run: the profile takes the device's timestamps
    // around each call, or, on a backend without a timer, waits for each.
    const gpu = backend.capabilities().device.kind === "gpu";
    const timer = gpu ? backend.timer : undefined;
    this.profiler = new StepProfiler(undefined, gpu && !timer ? () => backend.synchronize() : undefined, timer);
  }

  /** The run's step count, once the run knows it (the window to time is fixed at the first step). */
  setTotalSteps(totalSteps: number): void {
    this.totalSteps = totalSteps;
  }

  /** Call before trainer.step() with the trainer's step count. */
  beforeStep(step: number): void {
    if (!this.window) {
      const warmup = Math.min(PROFILE_WARMUP_STEPS, Math.max(0, this.totalSteps - step - 1));
      this.window = { first: step + warmup, last: Math.min(this.totalSteps, step + warmup + this.requested) - 1 };
    }
    this.profiler.armed = !this.done && step >= this.window.first && step <= this.window.last;
    this.stepStart = performance.now();
  }

  /** Call after trainer.step(); returns the table once the last step to profile is done. */
  afterStep(): string | undefined {
    if (!this.profiler.armed) return undefined;
    this.measured.push(performance.now() - this.stepStart);
    this.profiler.armed = false;
    return this.measured.length > this.window!.last - this.window!.first ? this.finish() : undefined;
  }

  /** Writes what was recorded (a run that ended before the last profiled step); undefined when nothing was. */
  finish(): string | undefined {
    if (this.done || this.profiler.steps.length === 0) return undefined;
    this.done = true;
    const steps = this.profiler.steps;
    const summary = summarizeProfile(steps);
    const context = {
      measuredStepMs: this.measured.reduce((t, ms) => t + ms, 0) / this.measured.length,
      device: this.backend.capabilities().device.name,
      synchronized: this.profiler.synchronize !== undefined,
      deviceTimed: this.profiler.timer !== undefined,
      ...(this.roofline.peakFlops && this.roofline.memoryBandwidth ? { peakFlops: this.roofline.peakFlops, memoryBandwidth: this.roofline.memoryBandwidth } : {}),
    };
    const profileFile = path.join(this.outputDir, "profile.json");
    const traceFile = path.join(this.outputDir, "trace.json");
    writeFileSync(profileFile, `${JSON.stringify({ ...context, ...summary }, null, 2)}\n`);
    writeFileSync(traceFile, JSON.stringify(chromeTrace(steps, process.pid)));
    return `${formatProfileTable(summary, context)}\n\nwrote ${profileFile} and ${traceFile} (open it in chrome://tracing or https://ui.perfetto.dev)`;
  }
}
