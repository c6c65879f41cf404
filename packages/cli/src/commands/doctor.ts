import type { Command } from "commander";
import { formatDoctorReport } from "../doctor/format.js";
import { gatherDoctorReport } from "../doctor/gather.js";

export function registerDoctor(program: Command): void {
  program
    .command("doctor")
    .description("show what kiln sees: CPU SIMD and threads, NVIDIA driver, GPU kernels, cuBLAS, NCCL")
    .option("--json", "print the report as JSON")
    .action(async (opts: { json?: boolean }) => {
      const report = await gatherDoctorReport();
      process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `kiln doctor\n${formatDoctorReport(report)}\n`);
      if (!report.wasm.ok) process.exitCode = 1;
    });
}
