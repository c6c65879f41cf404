import { access, constants, mkdir } from "node:fs/promises";
import path from "node:path";
import type { Command } from "commander";
import { ConfigError } from "@kiln/contract";
import { writeFileAtomically } from "@kiln/core";
import { readRunMetrics, runNames } from "../plot/run-metrics.js";
import { positiveInt } from "./parse-flags.js";

interface PlotFlags {
  output?: string;
  width: number;
  height: number;
}

/** <stem>.png and <stem>.svg: --output without its extension, else <run>/plot for one run and ./plot for several. */
function outputStem(runs: readonly string[], output: string | undefined): string {
  if (output !== undefined) return output.replace(/\.(png|svg)$/i, "");
  return runs.length === 1 && !runs[0].endsWith(".jsonl") ? path.join(runs[0], "plot") : "plot";
}

async function ensureWritableFolder(dir: string, output: string | undefined): Promise<void> {
  try {
    await mkdir(dir, { recursive: true });
    await access(dir, constants.W_OK);
  } catch (err) {
    throw new ConfigError(`cannot write the plot into this folder (${(err as NodeJS.ErrnoException).code ?? String(err)})`, {
      where: output === undefined ? dir : `--output ${output}`,
      hint: "pass --output with a path in a folder you can write to",
    });
  }
}

export function registerPlot(program: Command): void {
  program
    .command("plot")
    .description("draw loss and val_loss (runs overlaid), learning rate and throughput to a PNG and an SVG")
    .argument("<run-dir...>", "output folders of kiln train runs (each holds a metrics.jsonl)")
    .option("-o, --output <file>", "where to write <file>.png and <file>.svg (default: <run-dir>/plot for one run, ./plot for several)")
    .option("--width <px>", "image width", positiveInt, 1200)
    .option("--height <px>", "image height", positiveInt, 900)
    .action(async (runs: string[], flags: PlotFlags) => {
      const names = runNames(runs);
      const metrics = runs.map((run, i) => readRunMetrics(run, names[i]));
      // ECharts and resvg load only for this command.
      const { renderPlot } = await import("../plot/render-plot.js");
      const { svg, png } = renderPlot(metrics, flags.width, flags.height);
      const stem = outputStem(runs, flags.output);
      await ensureWritableFolder(path.dirname(path.resolve(stem)), flags.output);
      for (const [file, data] of [
        [`${stem}.png`, png],
        [`${stem}.svg`, svg],
      ] as const) {
        await writeFileAtomically(file, (fh) => fh.writeFile(data));
        process.stdout.write(`wrote ${file}\n`);
      }
    });
}
