import { LineChart } from "echarts/charts";
import { GridComponent, LegendComponent, TooltipComponent } from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";

echarts.use([LineChart, GridComponent, LegendComponent, TooltipComponent, CanvasRenderer]);

type Point = [number, number];

/** loss and val_loss (left axis) and tokens/s (right axis) by step, drawn as they arrive. */
export class LossChart {
  private readonly chart: echarts.ECharts;
  private readonly series: Record<"loss" | "val_loss" | "tokens/s", Point[]> = { loss: [], val_loss: [], "tokens/s": [] };
  private pending = false;

  constructor(element: HTMLElement) {
    this.chart = echarts.init(element);
    this.chart.setOption({
      animation: false,
      tooltip: { trigger: "axis" },
      legend: { top: 0, data: ["loss", "val_loss", "tokens/s"] },
      grid: { left: 48, right: 64, top: 36, bottom: 32 },
      xAxis: { type: "value", name: "step", min: 0 },
      yAxis: [
        { type: "value", name: "loss", scale: true },
        { type: "value", name: "tokens/s", splitLine: { show: false } },
      ],
      series: [
        { name: "loss", type: "line", showSymbol: false, data: [] },
        { name: "val_loss", type: "line", data: [] },
        { name: "tokens/s", type: "line", yAxisIndex: 1, showSymbol: false, lineStyle: { type: "dashed" }, data: [] },
      ],
    });
    new ResizeObserver(() => this.chart.resize()).observe(element);
  }

  add(name: keyof LossChart["series"], step: number, value: number): void {
    this.series[name].push([step, value]);
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.chart.setOption({ series: [{ data: this.series.loss }, { data: this.series.val_loss }, { data: this.series["tokens/s"] }] });
    });
  }

  clear(): void {
    for (const s of Object.values(this.series)) s.length = 0;
    this.chart.setOption({ series: [{ data: [] }, { data: [] }, { data: [] }] });
  }
}
