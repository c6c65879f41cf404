import fs from "node:fs";
import path from "node:path";
import { RecordLogFile, writeFileAtomicallySync } from "@kiln/core";
import { TensorBoardLog } from "./tensorboard-log.js";

const WHAT = "the metrics log";

/** One training log line (the headless JSON format), or an evaluation line with val_loss. */
export interface MetricsLine {
  step: number;
  loss?: number;
  grad_norm?: number;
  /** Mixture-of-experts models: the load-balancing loss (loss is the cross-entropy alone). */
  aux_loss?: number;
  /** Mixture-of-experts models: the busiest expert's tokens over an even share in the step (1 = even, E/k at most), the largest over layers. */
  expert_imbalance?: number;
  learning_rate?: number;
  epoch?: number;
  "it/s"?: number;
  "tokens/s"?: number;
  mfu?: number | null;
  /** Bytes in use in the device's arena (the backend's allocator). */
  mem_bytes?: number;
  /** The process's peak resident set size so far (worker threads included). */
  peak_rss_bytes?: number;
  val_loss?: number;
  /** The step's update was skipped: f16 gradients overflowed, or (with --on-nonfinite skip) values went non-finite. */
  skipped?: boolean;
  /** The step's loss or gradients were NaN or infinite. */
  nonfinite?: boolean;
  /** f16: the loss scale the step used. */
  loss_scale?: number;
}

/**
 * Appends JSON lines to <output>/metrics.jsonl (and to stdout when headless), and their
 * scalars to <output>/tensorboard. Each line is written whole or not at all (RecordLogFile).
 */
export class MetricsLog {
  private readonly file: RecordLogFile;
  private readonly tensorboard: TensorBoardLog;

  private readonly created: boolean;

  /** `resumedAt`: drop lines of steps after it (logged by a run that stopped before its next checkpoint). */
  constructor(
    outputDir: string,
    private readonly toStdout: boolean,
    resumedAt?: number,
  ) {
    const file = path.join(outputDir, "metrics.jsonl");
    this.created = !fs.existsSync(file);
    if (!this.created) keepWholeLines(file, resumedAt);
    this.file = RecordLogFile.openToAppend(file, { what: WHAT });
    this.tensorboard = new TensorBoardLog(outputDir, resumedAt);
  }

  write(line: MetricsLine): void {
    const text = `${JSON.stringify(line, (_k, v: unknown) => (typeof v === "number" && !Number.isInteger(v) ? Number(v.toPrecision(6)) : v))}\n`;
    this.file.append(text);
    if (this.toStdout) process.stdout.write(text);
    this.tensorboard.write(line);
  }

  private closed = false;

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.file.close();
    } finally {
      this.tensorboard.close();
    }
  }

  /**
   * For a run stopped by a full disk before any checkpoint held its steps: removes what it
   * logged (metrics.jsonl when this run created it, its TensorBoard event file), so that
   * the same command can run again once there is space. Closes the log first.
   */
  discard(): void {
    try {
      this.close();
    } catch {
      // The disk is full: the files go anyway.
    }
    if (this.created) fs.rmSync(this.file.path, { force: true });
    this.tensorboard.discard();
  }
}

/**
 * Rewrites an earlier run's metrics.jsonl (atomically) without what must not be appended
 * to: a last line cut short (the run was killed while writing it) and, when resuming, the
 * lines of steps after `resumedAt`. A line that is not JSON is kept as it is (readers skip it).
 */
function keepWholeLines(file: string, resumedAt: number | undefined): void {
  const text = fs.readFileSync(file, "utf8");
  const whole = text.slice(0, text.lastIndexOf("\n") + 1);
  const lines = whole.split("\n").filter((line) => line.trim() !== "");
  const kept = resumedAt === undefined ? lines : lines.filter((line) => !(stepOf(line) > resumedAt));
  const rewritten = kept.map((l) => `${l}\n`).join("");
  if (rewritten !== text) writeFileAtomicallySync(file, rewritten, { what: WHAT });
}

/** The step of a metrics line; NaN for a line that is not one. */
function stepOf(line: string): number {
  try {
    const step = (JSON.parse(line) as Partial<MetricsLine>).step;
    return typeof step === "number" ? step : Number.NaN;
  } catch {
    return Number.NaN;
  }
}
