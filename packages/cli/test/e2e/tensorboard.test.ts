import { readdir, rm } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { metricsLog, stepCheckpoints } from "./support/checkpoints.js";
import { expectSuccess } from "./support/runs.js";
import { type DecodedEvent, crc32c, readEvents } from "./support/tfevents-reader.js";
import { Workspace, textTokens } from "./support/workspace.js";

// Every run writes its metrics as TensorBoard scalars to <output>/tensorboard/events.out.tfevents.*,
// read back here by a reader written independently of kiln's writer.
const TAGS: Record<string, string> = {
  loss: "loss",
  val_loss: "val_loss",
  learning_rate: "learning_rate",
  grad_norm: "grad_norm",
  "tokens/s": "tokens_per_second",
  mfu: "mfu",
};

let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("tensorboard");
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 5, log_interval: 1, eval_interval: 2, eval_iters: 1, save_interval: 2 } });
  await ws.writeTokens("data.bin", textTokens(3000));
});
afterAll(() => ws.remove());

const train = async (...args: string[]) =>
  expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "out", "--headless", ...args]), `kiln train ${args.join(" ")}`);

async function eventFiles(): Promise<string[]> {
  return (await readdir(ws.path("out", "tensorboard"))).filter((n) => n.startsWith("events.out.tfevents.")).sort();
}

/** (step, value) of one tag over the scalar events of several files, in file order. */
function points(events: DecodedEvent[], tag: string): [number, number][] {
  return events.flatMap((e) => e.values.filter((v) => v.tag === tag).map((v): [number, number] => [e.step, v.simpleValue]));
}

/** (step, value) of one metrics.jsonl key. */
function metricPoints(lines: Record<string, unknown>[], key: string): [number, number][] {
  return lines.filter((l) => typeof l[key] === "number").map((l) => [l.step as number, l[key] as number]);
}

function expectSamePoints(actual: [number, number][], expected: [number, number][]) {
  expect(actual.map(([s]) => s)).toEqual(expected.map(([s]) => s));
  // metrics.jsonl keeps 6 significant digits; the event holds a float32.
  actual.forEach(([, v], i) => expect(Math.abs(v - expected[i][1])).toBeLessThanOrEqual(1e-5 * Math.abs(expected[i][1]) + 1e-12));
}

describe("TensorBoard event files", () => {
  it("the test's CRC32C matches the standard check value", () => {
    expect(crc32c(new TextEncoder().encode("123456789"))).toBe(0xe3069283);
  });

  it("hold a file_version header, then every logged metric under its tag at its step", async () => {
    const started = Date.now() / 1000;
    await train();
    const files = await eventFiles();
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^events\.out\.tfevents\.\d+\.[^.]+.*\.\d+\.\d+$/);
    const events = await readEvents(ws.path("out", "tensorboard", files[0]));
    expect(events[0].fileVersion).toBe("brain.Event:2");
    expect(events[0].values).toEqual([]);
    for (const e of events.slice(1)) {
      expect(e.fileVersion).toBeUndefined();
      expect(e.values.length).toBeGreaterThan(0);
      expect(e.wallTime).toBeGreaterThanOrEqual(Math.floor(started) - 1);
      expect(e.wallTime).toBeLessThanOrEqual(Date.now() / 1000 + 1);
    }
    const lines = await metricsLog(ws.path("out"));
    expect(points(events, "loss").map(([s]) => s)).toEqual([1, 2, 3, 4, 5]);
    expect(points(events, "val_loss").map(([s]) => s)).toEqual([2, 4, 5]);
    for (const [key, tag] of Object.entries(TAGS)) expectSamePoints(points(events, tag), metricPoints(lines, key));
    const tags = new Set(events.flatMap((e) => e.values.map((v) => v.tag)));
    expect([...tags].every((t) => Object.values(TAGS).includes(t))).toBe(true);
  });

  it("after --resume, hold each step once: the earlier file loses the steps past the checkpoint", async () => {
    // As if the first run had stopped after its step 2 checkpoint but logged steps 3 to 5.
    expect((await stepCheckpoints(ws.path("out"))).map((c) => c.step)).toEqual([2, 4, 5]);
    await Promise.all([4, 5].map((step) => rm(ws.path("out", `step_${step}.safetensors`))));
    await train("--resume", "auto", "--max-steps", "6");
    const files = await eventFiles();
    expect(files).toHaveLength(2);
    const [earlier, later] = await Promise.all(files.map((f) => readEvents(ws.path("out", "tensorboard", f))));
    expect(points(earlier, "loss").map(([s]) => s)).toEqual([1, 2]);
    expect(points(later, "loss").map(([s]) => s)).toEqual([3, 4, 5, 6]);
    expect(later[0].fileVersion).toBe("brain.Event:2");
    const all = [...earlier, ...later];
    const lines = await metricsLog(ws.path("out"));
    for (const [key, tag] of Object.entries(TAGS)) expectSamePoints(points(all, tag), metricPoints(lines, key));
    expect((await readdir(ws.path("out", "tensorboard"))).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  });
});
