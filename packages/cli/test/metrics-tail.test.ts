import { appendFile, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MetricsTail } from "../src/dashboard/metrics-tail.js";

let dir: string;
let file: string;
let warnings: string[];
let tail: MetricsTail;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "kiln-tail-"));
  file = path.join(dir, "metrics.jsonl");
  warnings = [];
  tail = new MetricsTail(file, (m) => warnings.push(m));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe("MetricsTail", () => {
  it("waits for the file, then reads complete lines only, as they are appended", async () => {
    expect(await tail.poll()).toEqual({ reset: false, added: [] });
    await writeFile(file, '{"step":1,"loss":3}\n{"step":2,"lo');
    expect(await tail.poll()).toEqual({ reset: false, added: [{ step: 1, loss: 3 }] });
    await appendFile(file, 'ss":2.5}\n{"step":2,"val_loss":2.7}\n');
    expect(await tail.poll()).toEqual({ reset: false, added: [{ step: 2, loss: 2.5 }, { step: 2, val_loss: 2.7 }] });
    expect(await tail.poll()).toEqual({ reset: false, added: [] });
    expect(tail.lines.map((l) => l.step)).toEqual([1, 2, 2]);
  });

  it("starts over when the file is replaced (a resumed run trims it) or cut shorter", async () => {
    await writeFile(file, '{"step":1,"loss":3}\n{"step":2,"loss":2}\n{"step":3,"loss":1}\n');
    await tail.poll();
    await writeFile(`${file}.tmp`, '{"step":1,"loss":3}\n');
    await rename(`${file}.tmp`, file);
    expect(await tail.poll()).toEqual({ reset: true, added: [{ step: 1, loss: 3 }] });
    await writeFile(file, "");
    expect(await tail.poll()).toEqual({ reset: true, added: [] });
    expect(tail.lines).toEqual([]);
  });

  it("skips a line that is not a metrics line and says which", async () => {
    await writeFile(file, '{"step":1,"loss":3}\nnot json\n{"loss":1}\n{"step":2,"loss":2}\n');
    expect((await tail.poll()).added.map((l) => l.step)).toEqual([1, 2]);
    expect(warnings).toEqual([`${file}:2: skipped a line that is not a metrics line`, `${file}:3: skipped a line that is not a metrics line`]);
  });
});
