import fs from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { KilnError } from "@kiln/contract";
import { RecordLogFile } from "../src/index.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "kiln-records-"));
});
afterEach(async () => {
  vi.restoreAllMocks();
  await rm(dir, { recursive: true, force: true });
});

describe("RecordLogFile", () => {
  it("appends to an existing file, and creates a new one only where none is", async () => {
    const file = path.join(dir, "metrics.jsonl");
    await writeFile(file, "1\n");
    const log = RecordLogFile.openToAppend(file, { what: "the metrics log" });
    expect(log.byteLength).toBe(2);
    log.append("2\n");
    log.append(new TextEncoder().encode("3\n"));
    log.close();
    expect(await readFile(file, "utf8")).toBe("1\n2\n3\n");
    expect(RecordLogFile.createNew(file, { what: "the metrics log" })).toBeUndefined();
    const fresh = RecordLogFile.createNew(path.join(dir, "new"), { what: "the event file" });
    expect(fresh?.byteLength).toBe(0);
    fresh?.close();
  });

  it("cuts a record the disk refused part way back out, so the next one follows the last whole one", async () => {
    const file = path.join(dir, "metrics.jsonl");
    const log = RecordLogFile.openToAppend(file, { what: "the metrics log" });
    log.append('{"step":1}\n');
    const write = fs.writeSync;
    let calls = 0;
    // The disk takes 5 bytes of the record, then is full.
    vi.spyOn(fs, "writeSync").mockImplementation(((fd: number, bytes: Uint8Array, offset: number, length: number) => {
      if (calls++ === 0) return write(fd, bytes, offset, Math.min(length, 5));
      throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
    }) as typeof fs.writeSync);
    expect(() => log.append('{"step":2,"loss":1.5}\n')).toThrow(expect.objectContaining({ message: "cannot write the metrics log: disk full while writing" }));
    expect(await readFile(file, "utf8")).toBe('{"step":1}\n');
    vi.restoreAllMocks();
    log.append('{"step":3}\n');
    log.close();
    expect(await readFile(file, "utf8")).toBe('{"step":1}\n{"step":3}\n');
  });

  it("explains a file it cannot open", async () => {
    const err = (() => {
      try {
        RecordLogFile.openToAppend(path.join(dir, "no", "such", "log"), { what: "the metrics log" });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(KilnError);
    expect((err as KilnError).message).toBe("cannot write the metrics log: output directory does not exist");
  });
});
