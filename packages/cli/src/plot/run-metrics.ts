import fs from "node:fs";
import path from "node:path";
import { DataError } from "@kiln/contract";
import { fileReadError } from "@kiln/core";
import type { MetricsLine } from "../train/metrics-log.js";

/** A run's metrics: its name on charts and the lines of its metrics.jsonl. */
export interface RunMetrics {
  name: string;
  file: string;
  lines: MetricsLine[];
}

/** <run>/metrics.jsonl for a run folder; a path to a .jsonl file is taken as it is. */
export function metricsFileOf(run: string): string {
  return run.endsWith(".jsonl") ? run : path.join(run, "metrics.jsonl");
}

/**
 * The metrics lines in `text` (complete lines only: a last line without its newline is still
 * being written). A line that is not a JSON object with a numeric step throws DataError at file:line.
 */
export function parseMetricsText(text: string, file: string, firstLine = 1): MetricsLine[] {
  const complete = text.slice(0, text.lastIndexOf("\n") + 1);
  const lines: MetricsLine[] = [];
  complete.split("\n").forEach((raw, i) => {
    if (raw.trim() === "") return;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch {
      value = undefined;
    }
    const step = (value as { step?: unknown } | undefined)?.step;
    if (typeof value !== "object" || value === null || typeof step !== "number") {
      throw new DataError("this line is not a metrics line (a JSON object with a numeric step)", {
        where: `${file}:${firstLine + i}`,
        hint: "pass the output folder of a kiln train run, whose metrics.jsonl kiln wrote",
      });
    }
    lines.push(value as MetricsLine);
  });
  return lines;
}

/** Reads a run's metrics.jsonl; refuses, saying what to do, when it is missing or holds no training line. */
export function readRunMetrics(run: string, name: string): RunMetrics {
  const file = metricsFileOf(run);
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (err) {
    throw fileReadError(err, file, {
      what: path.basename(file),
      error: DataError,
      hints: { ENOENT: "pass the output folder of a kiln train run (--output-dir, or trainer.checkpoint_dir of its config)" },
    });
  }
  const lines = parseMetricsText(text, file);
  if (!lines.some((l) => typeof l.loss === "number")) {
    throw new DataError("the run has logged no training step yet", { where: file, hint: "wait for the first log interval of the run (trainer.log_interval), then plot again" });
  }
  return { name, file, lines };
}

/** Chart names for runs: each folder's base name, or the path as given where two base names clash. */
export function runNames(runs: readonly string[]): string[] {
  const base = runs.map((r) => path.basename(path.resolve(r.endsWith(".jsonl") ? path.dirname(r) : r)));
  return runs.map((r, i) => (base.filter((b) => b === base[i]).length > 1 ? r : base[i]));
}
