import fs from "node:fs";
import path from "node:path";
import { TensorBoardLog } from "./tensorboard-log.js";

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

/** Appends JSON lines to <output>/metrics.jsonl (and to stdout when headless), and their scalars to <output>/tensorboard. */
export class MetricsLog {
  private readonly fd: number;
  private readonly tensorboard: TensorBoardLog;

  /** `resumedAt`: drop lines of steps after it (logged by a run that stopped before its next checkpoint). */
  constructor(
    outputDir: string,
    private readonly toStdout: boolean,
    resumedAt?: number,
  ) {
    const file = path.join(outputDir, "metrics.jsonl");
    if (resumedAt !== undefined && fs.existsSync(file)) {
      const kept = fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((line) => line.trim() !== "" && !((JSON.parse(line) as MetricsLine).step > resumedAt));
      const temp = `${file}.${process.pid}.tmp`;
      fs.writeFileSync(temp, kept.map((l) => `${l}\n`).join(""));
      fs.renameSync(temp, file);
    }
    this.fd = fs.openSync(file, "a");
    this.tensorboard = new TensorBoardLog(outputDir, resumedAt);
  }

  write(line: MetricsLine): void {
    const text = `${JSON.stringify(line, (_k, v: unknown) => (typeof v === "number" && !Number.isInteger(v) ? Number(v.toPrecision(6)) : v))}\n`;
    fs.writeSync(this.fd, text);
    if (this.toStdout) process.stdout.write(text);
    this.tensorboard.write(line);
  }

  close(): void {
    fs.closeSync(this.fd);
    this.tensorboard.close();
  }
}
