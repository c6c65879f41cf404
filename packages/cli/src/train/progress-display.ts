import cliProgress from "cli-progress";
import { formatBytes } from "../estimate/format-bytes.js";
import type { MetricsLine } from "./metrics-log.js";

/** A progress bar on a TTY: step/total, loss, it/s, tokens/s, MFU, device memory, peak RSS, ETA. */
export class ProgressDisplay {
  private readonly multi: cliProgress.MultiBar;
  private readonly bar: cliProgress.SingleBar;

  constructor(total: number, start: number) {
    this.multi = new cliProgress.MultiBar(
      {
        format: "step {value}/{total} |{bar}| loss {loss} | {its} it/s | {tps} tok/s | mfu {mfu} | mem {mem} | rss {rss} | eta {eta_formatted}",
        barsize: 24,
        hideCursor: true,
        etaBuffer: 20,
        clearOnComplete: false,
      },
      cliProgress.Presets.shades_classic,
    );
    this.bar = this.multi.create(total, start, { loss: "-", its: "-", tps: "-", mfu: "-", mem: "-", rss: "-" });
  }

  update(m: MetricsLine): void {
    this.bar.update(m.step, {
      loss: m.loss?.toFixed(4) ?? "-",
      its: m["it/s"]?.toFixed(2) ?? "-",
      tps: m["tokens/s"] !== undefined ? Math.round(m["tokens/s"]) : "-",
      mfu: m.mfu === null || m.mfu === undefined ? "-" : `${(100 * m.mfu).toFixed(1)}%`,
      mem: m.mem_bytes !== undefined ? formatBytes(m.mem_bytes) : "-",
      rss: m.peak_rss_bytes !== undefined ? formatBytes(m.peak_rss_bytes) : "-",
    });
  }

  /** Prints a line above the bar (evaluation results, checkpoints). */
  log(text: string): void {
    this.multi.log(`${text}\n`);
  }

  stop(): void {
    this.multi.stop();
  }
}
