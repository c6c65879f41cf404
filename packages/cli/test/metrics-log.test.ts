import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MetricsLog } from "../src/train/metrics-log.js";

let dir: string;
let file: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "kiln-metrics-log-"));
  file = path.join(dir, "metrics.jsonl");
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const EARLIER = '{"step":1,"loss":3}\n{"step":2,"loss":2.5}\n{"step":2,"val_loss":2.7}\n{"step":3,"loss":2}\n{"step":4,"lo';

describe("MetricsLog", () => {
  it("resuming, drops the earlier run's lines after the checkpoint's step and its cut-short last line", async () => {
    await writeFile(file, EARLIER);
    const log = new MetricsLog(dir, false, 2);
    log.write({ step: 3, loss: 1.9 });
    log.close();
    expect(await readFile(file, "utf8")).toBe('{"step":1,"loss":3}\n{"step":2,"loss":2.5}\n{"step":2,"val_loss":2.7}\n{"step":3,"loss":1.9}\n');
    expect((await readdir(dir)).sort()).toEqual(["metrics.jsonl", "tensorboard"]);
  });

  it("starting over in the same folder, appends after the last whole line", async () => {
    await writeFile(file, EARLIER);
    const log = new MetricsLog(dir, false);
    log.write({ step: 1, loss: 4 });
    log.close();
    const lines = (await readFile(file, "utf8")).split("\n");
    expect(lines.slice(-3)).toEqual(['{"step":3,"loss":2}', '{"step":1,"loss":4}', ""]);
    for (const line of lines.filter((l) => l !== "")) expect(() => JSON.parse(line)).not.toThrow();
  });

  it("keeps a line it cannot read as it is", async () => {
    await writeFile(file, '{"step":1,"loss":3}\nnot json\n{"step":5,"loss":1}\n');
    new MetricsLog(dir, false, 2).close();
    expect(await readFile(file, "utf8")).toBe('{"step":1,"loss":3}\nnot json\n');
  });
});
