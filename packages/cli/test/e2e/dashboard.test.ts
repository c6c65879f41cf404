import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { metricsLog } from "./support/checkpoints.js";
import { type HeadlessChromium, chromiumMissingReason, launchChromium } from "./support/chromium.js";
import type { KilnProcess } from "./support/kiln-process.js";
import { Workspace, textTokens } from "./support/workspace.js";

// kiln dashboard serves a page that follows a run as it trains: opened in headless Chromium
// while a training run writes metrics.jsonl, its chart shows the run's points and gains more.
const skipReason = chromiumMissingReason();

let ws: Workspace;
let training: KilnProcess | undefined;
let dashboard: KilnProcess | undefined;
let browser: HeadlessChromium | undefined;

beforeAll(async () => {
  ws = await Workspace.create("dashboard");
  await ws.writeConfig("long.yaml", { trainer: { max_steps: 100_000, log_interval: 1, eval_interval: 20, eval_iters: 1, save_interval: 100_000 } });
  await ws.writeTokens("data.bin", textTokens(3000));
});

afterAll(async () => {
  await browser?.close();
  for (const p of [training, dashboard]) if (p && p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
  await ws.remove();
});

/** The page's chart state: the status line's point count, and the loss and val_loss series as drawn. */
interface PageState {
  points: number;
  status: string;
  loss: [number, number][];
  valLoss: [number, number][];
}

describe.skipIf(skipReason !== undefined)(`kiln dashboard${skipReason ? ` (skipped: ${skipReason})` : ""}`, () => {
  it("shows the points of a running training in headless Chromium, and gains more as it trains", { timeout: 120_000 }, async () => {
    training = ws.start(["train", "-f", "long.yaml", "-d", "data.bin", "--output-dir", "out", "--headless"]);
    await training.until(() => training!.stdoutLines.length >= 3, "the first logged steps", 60_000);

    dashboard = ws.start(["dashboard", "out", "--port", "0"]);
    await dashboard.until(() => /http:\/\/\S+\//.test(dashboard!.stdout), "the dashboard's address");
    const url = /(http:\/\/\S+\/)/.exec(dashboard.stdout)![1];
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);

    browser = await launchChromium();
    const page = await browser.context.newPage();
    const requests: string[] = [];
    page.on("request", (r) => requests.push(r.url()));
    const pageErrors: string[] = [];
    page.on("pageerror", (e) => pageErrors.push(e.message));
    await page.goto(url);

    const state = (): Promise<PageState> =>
      page.evaluate(() => {
        const status = document.getElementById("status")!;
        const chart = (window as unknown as { echarts: typeof import("echarts") }).echarts.getInstanceByDom(document.getElementById("chart")!)!;
        const series = chart.getOption().series as { id: string; data: [number, number][] }[];
        const data = (id: string) => series.find((s) => s.id === id)?.data ?? [];
        return { points: Number(status.dataset.points), status: status.textContent ?? "", loss: data("0:loss"), valLoss: data("0:val_loss") };
      });

    await page.waitForFunction(() => Number(document.getElementById("status")!.dataset.points) >= 3, undefined, { timeout: 30_000 });
    const first = await state();
    expect(first.loss.length).toBe(first.points);
    expect(first.status).toMatch(/^step \d+ · loss \d+\.\d{4}/);
    expect(training.child.exitCode).toBeNull();

    // Training goes on: the page gains points without a reload.
    await page.waitForFunction((n) => Number(document.getElementById("status")!.dataset.points) >= n, first.points + 20, { timeout: 60_000 });
    const later = await state();
    expect(later.loss.slice(0, first.loss.length)).toEqual(first.loss);
    expect(later.valLoss.length).toBeGreaterThan(0);

    // Stop training (Ctrl-C): the page ends with exactly the points of metrics.jsonl.
    training.child.kill("SIGINT");
    expect((await training.exited).code).toBe(130);
    const lines = await metricsLog(ws.path("out"));
    const loss = lines.filter((l) => typeof l.loss === "number").map((l) => [l.step, l.loss]);
    const valLoss = lines.filter((l) => typeof l.val_loss === "number").map((l) => [l.step, l.val_loss]);
    expect(loss.length).toBeGreaterThan(later.points);
    await page.waitForFunction((n) => Number(document.getElementById("status")!.dataset.points) === n, loss.length, { timeout: 10_000 });
    const last = await state();
    expect(last.loss).toEqual(loss);
    expect(last.valLoss).toEqual(valLoss);

    // Everything the page loaded came from the dashboard itself.
    expect(requests.length).toBeGreaterThanOrEqual(4);
    expect(requests.filter((r) => !r.startsWith(url))).toEqual([]);
    expect(pageErrors).toEqual([]);

    dashboard.child.kill("SIGTERM");
    const stopped = await dashboard.exited;
    expect(stopped.code).toBe(0);
  });
});
