import { readFile } from "node:fs/promises";
import { PNG } from "pngjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectRefused } from "./support/expectations.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// kiln plot draws runs' metrics.jsonl to a PNG and an SVG; the PNG is decoded here (pngjs) and
// must hold the lines of each run in its color.
const RUN_COLORS = ["#1f77b4", "#d62728"];

let ws: Workspace;
beforeAll(async () => {
  ws = await Workspace.create("plot");
  await ws.writeTokens("data.bin", textTokens(3000));
  for (const [name, lr] of [
    ["slow", 0.001],
    ["fast", 0.01],
  ] as const) {
    await ws.writeConfig(`${name}.yaml`, { trainer: { max_steps: 12, log_interval: 1, eval_interval: 4, eval_iters: 1, learning_rate: lr } });
    expectSuccess(await ws.run(["train", "-f", `${name}.yaml`, "-d", "data.bin", "--output-dir", name, "--headless"]), `training ${name}`);
  }
});
afterAll(() => ws.remove());

/** Pixels of the image whose color is exactly `hex`. */
function pixelsOf(png: PNG, hex: string): number {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  let n = 0;
  for (let i = 0; i < png.data.length; i += 4) if (png.data[i] === r && png.data[i + 1] === g && png.data[i + 2] === b && png.data[i + 3] === 255) n++;
  return n;
}

describe("kiln plot", () => {
  it("overlays several runs in one PNG and one SVG", async () => {
    const r = expectSuccess(await ws.run(["plot", "slow", "fast", "-o", "charts/compare"]), "kiln plot");
    expect(r.stdout).toBe("wrote charts/compare.png\nwrote charts/compare.svg\n");

    const png = PNG.sync.read(await readFile(ws.path("charts", "compare.png")));
    expect([png.width, png.height]).toEqual([1200, 900]);
    let drawn = 0;
    for (let i = 0; i < png.data.length; i += 4) if (png.data[i] < 200 || png.data[i + 1] < 200 || png.data[i + 2] < 200) drawn++;
    // Axes, labels and lines: far more than nothing, far less than everything.
    expect(drawn).toBeGreaterThan(0.01 * png.width * png.height);
    expect(drawn).toBeLessThan(0.5 * png.width * png.height);
    for (const color of RUN_COLORS) expect(pixelsOf(png, color), color).toBeGreaterThan(200);

    const svg = await readFile(ws.path("charts", "compare.svg"), "utf8");
    expect(svg).toMatch(/^<svg [^>]*width="1200" height="900"/);
    for (const color of RUN_COLORS) expect(svg.split(`stroke="${color}"`).length - 1, color).toBeGreaterThanOrEqual(3);
    for (const text of ["slow", "fast", "loss (solid) and val_loss (dashed)", "learning rate", "throughput"]) expect(svg).toContain(`>${text}<`);
  });

  it("writes <run>/plot.png and plot.svg for one run, at the size asked", async () => {
    const r = expectSuccess(await ws.run(["plot", "slow", "--width", "640", "--height", "480"]), "kiln plot one run");
    expect(r.stdout).toBe("wrote slow/plot.png\nwrote slow/plot.svg\n");
    const png = PNG.sync.read(await readFile(ws.path("slow", "plot.png")));
    expect([png.width, png.height]).toEqual([640, 480]);
    expect(pixelsOf(png, RUN_COLORS[0])).toBeGreaterThan(100);
    expect(pixelsOf(png, RUN_COLORS[1])).toBe(0);
  });

  it("refuses a folder without metrics.jsonl, writing nothing", async () => {
    const r = await ws.run(["plot", "slow", "nowhere", "-o", "none"]);
    expectRefused(r, { kind: "DataError", where: "nowhere/metrics.jsonl", message: /^metrics\.jsonl not found$/, hint: /output folder of a kiln train run/ });
    await expect(readFile(ws.path("none.png"))).rejects.toThrow(/ENOENT/);
  });

  it("refuses a metrics file with a line that is not a metrics line, naming the line", async () => {
    await ws.write("broken.jsonl", '{"step":1,"loss":2.5}\nnot json\n');
    const r = await ws.run(["plot", "broken.jsonl"]);
    expectRefused(r, { kind: "DataError", where: "broken.jsonl:2", message: /not a metrics line/, hint: /metrics\.jsonl/ });
  });
});
