import { appendFile, mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EventFileWriter, dropEventsAfter, readEventFile } from "../src/tensorboard/event-file.js";
import { frameRecord, maskedCrc32c, scanRecords } from "../src/tensorboard/record-framing.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "kiln-tfevents-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

function writeSteps(steps: number[]): string {
  const w = new EventFileWriter(dir);
  for (const step of steps) w.writeScalars(step, [{ tag: "loss", value: step / 2 }]);
  w.close();
  return w.file;
}

describe("TensorBoard event files", () => {
  it("masks CRC32C as TensorFlow does: rotate right by 15, add 0xa282ead8", () => {
    // CRC32C("123456789") = 0xe3069283 (the standard check value); masked by hand: 0x2507c60d + 0xa282ead8.
    expect(maskedCrc32c(new TextEncoder().encode("123456789"))).toBe(0xc78ab0e5);
    // An empty record: zero length, its CRC, no data, the mask of CRC 0 (the constant itself).
    const empty = Buffer.from(frameRecord(new Uint8Array()));
    expect(empty.length).toBe(16);
    expect(empty.subarray(0, 8).equals(Buffer.alloc(8))).toBe(true);
    expect(empty.readUInt32LE(12)).toBe(0xa282ead8);
  });

  it("reads back what it wrote; a cut-short or corrupt tail is left out", async () => {
    const file = writeSteps([1, 2, 3]);
    expect(readEventFile(file).map((e) => [e.step, e.scalars?.[0].value])).toEqual([[0, undefined], [1, 0.5], [2, 1], [3, 1.5]]);
    const whole = await readFile(file);
    await appendFile(file, frameRecord(new Uint8Array([1, 2, 3])).subarray(0, 10));
    expect(readEventFile(file)).toHaveLength(4);
    expect(scanRecords(await readFile(file)).damagedAt).toBe(whole.length);
  });

  it("drops the scalars after a step, and a damaged tail, keeping the header", async () => {
    const first = writeSteps([1, 2, 3, 4]);
    await appendFile(first, Buffer.from("garbage that is not a record"));
    const second = writeSteps([5]);
    dropEventsAfter(dir, 2);
    expect(readEventFile(first).map((e) => e.step)).toEqual([0, 1, 2]);
    expect(readEventFile(second).map((e) => e.step)).toEqual([0]);
    expect(scanRecords(await readFile(first)).damagedAt).toBeUndefined();
    expect((await readdir(dir)).filter((n) => !n.startsWith("events.out.tfevents."))).toEqual([]);
  });
});
