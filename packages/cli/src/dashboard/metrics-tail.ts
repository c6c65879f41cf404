import { open, stat } from "node:fs/promises";
import { DataError } from "@kiln/contract";
import { parseMetricsText } from "../plot/run-metrics.js";
import type { MetricsLine } from "../train/metrics-log.js";

/** What one look at the file found: `reset` when the file was replaced or cut (a resumed run trims it). */
export interface MetricsChange {
  reset: boolean;
  added: MetricsLine[];
}

/**
 * Follows a growing metrics.jsonl: each `poll` reads the bytes appended since the last one and
 * parses the complete lines. A file replaced (new inode) or shorter than before is read again from
 * the start. Lines that are not metrics are skipped and reported through `warn`.
 */
export class MetricsTail {
  /** Every line read so far (since the last reset). */
  readonly lines: MetricsLine[] = [];
  private offset = 0;
  private inode: number | undefined;
  private lineNumber = 1;
  private pending = Buffer.alloc(0);

  constructor(
    readonly file: string,
    private readonly warn: (message: string) => void,
  ) {}

  async poll(): Promise<MetricsChange> {
    let st;
    try {
      st = await stat(this.file);
    } catch {
      // Not there (yet, or while a resumed run replaces it): keep what was read.
      return { reset: false, added: [] };
    }
    const reset = this.inode !== undefined && (st.ino !== this.inode || st.size < this.offset);
    if (reset) this.restart();
    this.inode = st.ino;
    if (st.size === this.offset) return { reset, added: [] };
    const chunk = Buffer.alloc(st.size - this.offset);
    const fh = await open(this.file, "r");
    let read: number;
    try {
      ({ bytesRead: read } = await fh.read(chunk, 0, chunk.length, this.offset));
    } finally {
      await fh.close();
    }
    this.offset += read;
    const bytes = Buffer.concat([this.pending, chunk.subarray(0, read)]);
    const end = bytes.lastIndexOf(0x0a) + 1;
    this.pending = Buffer.from(bytes.subarray(end));
    const added = this.parse(bytes.subarray(0, end).toString("utf8"));
    this.lines.push(...added);
    return { reset, added };
  }

  private restart(): void {
    this.lines.length = 0;
    this.offset = 0;
    this.lineNumber = 1;
    this.pending = Buffer.alloc(0);
  }

  private parse(text: string): MetricsLine[] {
    const out: MetricsLine[] = [];
    for (const line of text.split("\n").slice(0, -1)) {
      try {
        out.push(...parseMetricsText(`${line}\n`, this.file, this.lineNumber));
      } catch (err) {
        if (!(err instanceof DataError)) throw err;
        this.warn(`${this.file}:${this.lineNumber}: skipped a line that is not a metrics line`);
      }
      this.lineNumber++;
    }
    return out;
  }
}
