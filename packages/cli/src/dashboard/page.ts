// The dashboard page's script (runs in the browser). It draws the run with the same chart
// option as kiln plot and adds the lines the server sends as metrics.jsonl grows.
import { chartOption } from "../plot/chart-option.js";
import type { MetricsLine } from "../train/metrics-log.js";

/** ECharts, loaded by the page from /vendor/echarts.min.js (the npm package's browser build). */
declare const echarts: typeof import("echarts");

const chartElement = document.getElementById("chart")!;
const status = document.getElementById("status")!;
const chart = echarts.init(chartElement, null, { renderer: "canvas" });
const run = { name: document.body.dataset.run ?? "run", lines: [] as MetricsLine[] };
let drawQueued = false;

function describe(lines: readonly MetricsLine[]): string {
  const last = (key: keyof MetricsLine): number | undefined => {
    for (let i = lines.length - 1; i >= 0; i--) {
      const v = lines[i][key];
      if (typeof v === "number") return v;
    }
    return undefined;
  };
  const train = lines.filter((l) => typeof l.loss === "number");
  if (train.length === 0) return "waiting for the first logged step…";
  const parts = [`step ${train[train.length - 1].step}`, `loss ${last("loss")!.toFixed(4)}`];
  const val = last("val_loss");
  if (val !== undefined) parts.push(`val_loss ${val.toFixed(4)}`);
  const tps = last("tokens/s");
  if (tps !== undefined) parts.push(`${Math.round(tps)} tokens/s`);
  return parts.join(" · ");
}

function draw(): void {
  drawQueued = false;
  chart.setOption(chartOption([run]), { notMerge: true });
  status.textContent = describe(run.lines);
  status.dataset.points = String(run.lines.filter((l) => typeof l.loss === "number").length);
}

/** Many lines can arrive at once: draw at most once per animation frame. */
function queueDraw(): void {
  if (drawQueued) return;
  drawQueued = true;
  requestAnimationFrame(draw);
}

const events = new EventSource("/events");
// Every connection (and reconnection) starts with a reset, then all lines so far.
events.addEventListener("reset", () => {
  run.lines = [];
  queueDraw();
});
events.addEventListener("lines", (e) => {
  run.lines.push(...(JSON.parse((e as MessageEvent<string>).data) as MetricsLine[]));
  queueDraw();
});
events.addEventListener("error", () => {
  status.textContent = "lost the connection to kiln dashboard; retrying…";
});
window.addEventListener("resize", () => chart.resize());
draw();
