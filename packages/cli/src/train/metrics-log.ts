import fs from "node:fs";
import path from "node:path";

/** One training log line (the headless JSON format), or an evaluation line with val_loss. */
export interface MetricsLine {
  step: number;
  loss?: number;
  grad_norm?: number;
  learning_rate?: number;
  epoch?: number;
  "it/s"?: number;
  "tokens/s"?: number;
  mfu?: number | null;
  mem_bytes?: number;
  val_loss?: number;
}

/** Appends JSON lines to <output>/metrics.jsonl, and to stdout when headless. */
export class MetricsLog {
  private readonly fd: number;

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
  }

  write(line: MetricsLine): void {
    const text = `${JSON.stringify(line, (_k, v: unknown) => (typeof v === "number" && !Number.isInteger(v) ? Number(v.toPrecision(6)) : v))}\n`;
    fs.writeSync(this.fd, text);
    if (this.toStdout) process.stdout.write(text);
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}
