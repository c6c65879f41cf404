import { Resvg } from "@resvg/resvg-js";
import * as echarts from "echarts";
import { type RunSeries, chartOption } from "./chart-option.js";

export interface RenderedPlot {
  svg: string;
  png: Uint8Array;
}

/** The runs' chart as an SVG (ECharts server-side rendering) and the same picture as a PNG (resvg). */
export function renderPlot(runs: readonly RunSeries[], width: number, height: number): RenderedPlot {
  const chart = echarts.init(null, null, { renderer: "svg", ssr: true, width, height });
  let svg: string;
  try {
    chart.setOption(chartOption(runs));
    svg = chart.renderToSVGString();
  } finally {
    chart.dispose();
  }
  const png = new Resvg(svg, { fitTo: { mode: "original" }, font: { loadSystemFonts: true } }).render().asPng();
  return { svg, png };
}
