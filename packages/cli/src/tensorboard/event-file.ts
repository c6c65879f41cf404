import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { RecordLogFile, writeFileAtomicallySync } from "@kiln/core";
import { FILE_VERSION, type ScalarEvent, decodeEvent, encodeEvent } from "./event-proto.js";
import { frameRecord, scanRecords } from "./record-framing.js";

const EVENT_FILE = /^events\.out\.tfevents\./;
const WHAT = "the TensorBoard event file";

/** The TensorBoard event files in `dir`, sorted by name (none when the folder does not exist). */
export function listEventFiles(dir: string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter((n) => EVENT_FILE.test(n) && !n.endsWith(".tmp"))
    .sort()
    .map((n) => path.join(dir, n));
}

/** Every intact event of an event file, in order (a cut-short or corrupt tail is left out). */
export function readEventFile(file: string): ScalarEvent[] {
  return scanRecords(fs.readFileSync(file)).records.map(decodeEvent);
}

/**
 * A new event file in `dir`, named as TensorFlow names them
 * (events.out.tfevents.<seconds>.<host>.<pid>.<n>), that events are appended to as they
 * come, each record whole or not at all (RecordLogFile).
 */
export class EventFileWriter {
  readonly file: string;
  private readonly out: RecordLogFile;

  constructor(dir: string) {
    fs.mkdirSync(dir, { recursive: true });
    const stem = `events.out.tfevents.${nameSeconds(dir)}.${os.hostname()}.${process.pid}`;
    for (let n = 0; ; n++) {
      const file = path.join(dir, `${stem}.${n}`);
      const out = RecordLogFile.createNew(file, { what: WHAT });
      if (out) {
        this.out = out;
        this.file = file;
        break;
      }
    }
    this.append({ wallTime: Date.now() / 1000, step: 0, fileVersion: FILE_VERSION });
  }

  /** Scalars (tag -> value) at `step`, stamped with the current time. */
  writeScalars(step: number, scalars: { tag: string; value: number }[]): void {
    if (scalars.length > 0) this.append({ wallTime: Date.now() / 1000, step, scalars });
  }

  close(): void {
    this.out.close();
  }

  private append(event: ScalarEvent): void {
    this.out.append(frameRecord(encodeEvent(event)));
  }
}

/**
 * The seconds in a new event file's name: now, or one past the last earlier file's when that would
 * not sort after it. TensorBoard reads a folder's files in name order, one after the other, so a
 * resumed run's file named before the earlier run's (the same second and a pid with more digits,
 * or a clock set back) would show its steps before the earlier ones.
 */
function nameSeconds(dir: string): number {
  const now = Math.floor(Date.now() / 1000);
  const last = listEventFiles(dir).map((f) => path.basename(f)).at(-1) ?? "";
  const seconds = /^events\.out\.tfevents\.(\d+)\./.exec(last)?.[1];
  if (seconds === undefined || `events.out.tfevents.${now}.` > last) return now;
  return Math.max(now, Number(seconds) + 1);
}

/**
 * Rewrites the event files in `dir` without the scalars of steps after `lastStep`
 * (written by a run that stopped before its next checkpoint) and without a damaged tail,
 * each atomically.
 */
export function dropEventsAfter(dir: string, lastStep: number): void {
  for (const file of listEventFiles(dir)) {
    const bytes = fs.readFileSync(file);
    const scan = scanRecords(bytes);
    const kept = scan.records.filter((r) => {
      const e = decodeEvent(r);
      return e.scalars === undefined || e.step <= lastStep;
    });
    if (kept.length === scan.records.length && scan.damagedAt === undefined) continue;
    // The temp file is named without "tfevents": TensorBoard reads every file whose name holds it.
    writeFileAtomicallySync(file, Buffer.concat(kept.map(frameRecord)), { what: WHAT, tempStem: "trim" });
  }
}
