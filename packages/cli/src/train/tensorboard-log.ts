import fs from "node:fs";
import path from "node:path";
import { EventFileWriter, dropEventsAfter } from "../tensorboard/event-file.js";
import { removeStaleTempFiles } from "./checkpoint-files.js";
import type { MetricsLine } from "./metrics-log.js";

/** TensorBoard tag of each metrics key that becomes a scalar (mem_bytes, it/s and epoch stay in metrics.jsonl). */
export const TENSORBOARD_TAGS = {
  loss: "loss",
  val_loss: "val_loss",
  learning_rate: "learning_rate",
  grad_norm: "grad_norm",
  aux_loss: "aux_loss",
  expert_imbalance: "expert_imbalance",
  "tokens/s": "tokens_per_second",
  mfu: "mfu",
} as const satisfies Partial<Record<keyof MetricsLine, string>>;

/** The folder under a run's output folder that holds its TensorBoard event files. */
export function tensorboardDir(outputDir: string): string {
  return path.join(outputDir, "tensorboard");
}

/** Writes metrics lines as scalars to a new event file in <output>/tensorboard, one per run. */
export class TensorBoardLog {
  private readonly writer: EventFileWriter;

  /** `resumedAt`: first drop the scalars of steps after it from the earlier runs' event files. */
  constructor(outputDir: string, resumedAt?: number) {
    const dir = tensorboardDir(outputDir);
    removeStaleTempFiles(dir);
    if (resumedAt !== undefined) dropEventsAfter(dir, resumedAt);
    this.writer = new EventFileWriter(dir);
  }

  write(line: MetricsLine): void {
    const scalars: { tag: string; value: number }[] = [];
    for (const [key, tag] of Object.entries(TENSORBOARD_TAGS)) {
      const value = line[key as keyof typeof TENSORBOARD_TAGS];
      if (typeof value === "number") scalars.push({ tag, value });
    }
    this.writer.writeScalars(line.step, scalars);
  }

  close(): void {
    this.writer.close();
  }

  /** After close(): removes this run's event file, and the folder when that leaves it empty. */
  discard(): void {
    fs.rmSync(this.writer.file, { force: true });
    try {
      fs.rmdirSync(path.dirname(this.writer.file));
    } catch {
      // Earlier runs' event files are still there.
    }
  }
}
