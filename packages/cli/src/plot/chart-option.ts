// The chart of one or more runs as an ECharts option. Used in Node (kiln plot renders it to
// SVG and PNG) and, unchanged, in the dashboard's page: this module imports nothing at run time.
import type { EChartsOption, LineSeriesOption } from "echarts";
import type { MetricsLine } from "../train/metrics-log.js";

export interface RunSeries {
  name: string;
  lines: readonly MetricsLine[];
}

type Key = "loss" | "val_loss" | "learning_rate" | "tokens/s";

const PANELS: { title: string; keys: Key[]; axis: string }[] = [
  { title: "loss (solid) and val_loss (dashed)", keys: ["loss", "val_loss"], axis: "loss" },
  { title: "learning rate", keys: ["learning_rate"], axis: "learning rate" },
  { title: "throughput", keys: ["tokens/s"], axis: "tokens/s" },
];

/** Line colors, one per run (in order). */
export const RUN_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/** Families tried in order: the first one installed draws the text (PNG rendering has no browser fallback). */
const FONTS = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif";

/** The id of a run's series for one metric: "<run index>:<key>". */
export function seriesId(run: number, key: Key): string {
  return `${run}:${key}`;
}

function points(lines: readonly MetricsLine[], key: Key): [number, number][] {
  const out: [number, number][] = [];
  for (const l of lines) {
    const v = l[key];
    if (typeof v === "number") out.push([l.step, v]);
  }
  return out;
}

/** Three panels stacked (loss and val_loss, learning rate, tokens/s) with every run overlaid; the legend names the runs. */
export function chartOption(runs: readonly RunSeries[]): EChartsOption {
  // Panel p's grid starts at 9 + 31p percent of the height, its title 4 percent above.
  const top = (p: number, above = 0) => `${9 + p * 31 - above}%`;
  const series: LineSeriesOption[] = [];
  runs.forEach((run, r) => {
    const color = RUN_COLORS[r % RUN_COLORS.length];
    PANELS.forEach((panel, p) => {
      for (const key of panel.keys) {
        const sparse = key === "val_loss";
        series.push({
          type: "line",
          id: seriesId(r, key),
          // Every series of a run carries the run's name, so its legend entry shows or hides all of them.
          name: run.name,
          xAxisIndex: p,
          yAxisIndex: p,
          data: points(run.lines, key),
          color,
          showSymbol: sparse,
          symbolSize: 5,
          sampling: "lttb",
          lineStyle: { width: 1.5, type: sparse ? "dashed" : "solid" },
          emphasis: { disabled: true },
        });
      }
    });
  });
  return {
    animation: false,
    backgroundColor: "#ffffff",
    textStyle: { fontFamily: FONTS },
    legend: { top: 4, data: runs.map((r) => r.name) },
    tooltip: { trigger: "axis" },
    title: PANELS.map((panel, p) => ({ text: panel.title, left: "center", top: top(p, 4), textStyle: { fontSize: 13, fontFamily: FONTS } })),
    grid: PANELS.map((_, p) => ({ left: 80, right: 50, top: top(p), height: "22%" })),
    xAxis: PANELS.map((_, p) => ({ type: "value", gridIndex: p, name: "step", nameLocation: "end", min: "dataMin", max: "dataMax", minInterval: 1 })),
    yAxis: PANELS.map((panel, p) => ({ type: "value", gridIndex: p, name: panel.axis, scale: true, splitLine: { lineStyle: { color: "#eeeeee" } } })),
    series,
  };
}
