import type { Command } from "commander";
import { startDashboard } from "../dashboard/dashboard-server.js";
import { checkRunFolder } from "../dashboard/run-folder.js";
import { metricsFileOf, runNames } from "../plot/run-metrics.js";
import { existsSync } from "node:fs";
import { nonNegativeInt } from "./parse-flags.js";

interface DashboardFlags {
  host: string;
  port: number;
}

export function registerDashboard(program: Command): void {
  program
    .command("dashboard")
    .description("serve a live page of a run's loss, val_loss, learning rate and throughput (updates as it trains)")
    .argument("<run-dir>", "output folder of a kiln train run (it may still be training, or about to start: the folder must exist)")
    .option("--host <address>", "address to listen on (another than 127.0.0.1 opens the page to the network)", "127.0.0.1")
    .option("--port <n>", "port to listen on (0 picks a free one)", nonNegativeInt, 6007)
    .action(async (run: string, flags: DashboardFlags) => {
      checkRunFolder(run);
      const dashboard = await startDashboard({
        run,
        runName: runNames([run])[0],
        host: flags.host,
        port: flags.port,
        warn: (message) => process.stderr.write(`warning: ${message}\n`),
      });
      // Runs until Ctrl-C or SIGTERM, then closes the server and exits 0. The handlers go in
      // before the address is printed: whoever reads it may stop the dashboard at once.
      const stopped = new Promise<void>((resolve) => {
        const stop = () => {
          process.off("SIGINT", stop);
          process.off("SIGTERM", stop);
          void dashboard.close().then(resolve);
        };
        process.on("SIGINT", stop);
        process.on("SIGTERM", stop);
      });
      process.stdout.write(`kiln dashboard: ${dashboard.url} (Ctrl-C to stop)\n`);
      if (!existsSync(metricsFileOf(run))) {
        process.stderr.write(`kiln dashboard: ${metricsFileOf(run)} does not exist yet; waiting for the run to log its first step (Ctrl-C to stop)\n`);
      }
      await stopped;
    });
}
