// The contract's conformance suite on a real GPU, without a test runner: every
// kernel x dtype x shape class through createCudaBackend against the reference
// oracle, in --passes passes (a case that passes once and fails once is racing).
// With --isolate each kernel runs in a process of its own, so a kernel that
// crashes or hangs the device is reported and the others still run.
// Prints each failure, then one JSON summary line; exits 1 when a case failed or a
// kernel crashed, 0 when all passed, 2 when there is no usable GPU.
// --sim runs the same on the CUDA simulator (cuda-sim), on a machine without a GPU.
// --prepared makes every call through the backend's prepare, as compiled steps do, and
// fails a call that takes more kernel scratch when issued than preparing it reserved.
// Usage: node tooling/bench/cuda-conformance.mjs [--device 0] [--kernel matmul[,attentionForward...]] [--filter "bf16 prime"] [--passes 2] [--isolate] [--sim] [--prepared]
// Needs the workspace built (pnpm turbo run build) with nvcc present.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { caseName } from "../../packages/contract/dist/conformance/case.js";
import { checkConformance } from "../../packages/contract/dist/conformance/check.js";
import { KERNEL_NAMES } from "../../packages/contract/dist/kernels/index.js";
import { createCudaBackend, createCudaSimBackend, cudaStatus } from "../../packages/kernels-cuda/dist/index.js";

const { values } = parseArgs({
  options: { device: { type: "string" }, kernel: { type: "string" }, filter: { type: "string" }, passes: { type: "string" }, isolate: { type: "boolean" }, sim: { type: "boolean" }, prepared: { type: "boolean" }, "timeout-s": { type: "string" } },
});
const status = cudaStatus();
if (values.sim ? !status.simulator.built : !status.addon.built || status.runtime.deviceCount === 0) {
  console.log(JSON.stringify({ gpu: false, status }));
  process.exit(2);
}
const passes = Number(values.passes ?? 2);

if (values.isolate) {
  const self = fileURLToPath(import.meta.url);
  const summary = { archs: status.addon.archs, passes, kernels: {}, crashed: [], totals: { passed: 0, failed: 0, skipped: 0 } };
  for (const kernel of values.kernel ? values.kernel.split(",") : KERNEL_NAMES) {
    const args = [self, "--kernel", kernel, "--passes", String(passes), ...(values.device ? ["--device", values.device] : []), ...(values.filter ? ["--filter", values.filter] : []), ...(values.sim ? ["--sim"] : []), ...(values.prepared ? ["--prepared"] : [])];
    const r = spawnSync(process.execPath, args, { encoding: "utf8", timeout: Number(values["timeout-s"] ?? 180) * 1000 });
    const lines = (r.stdout ?? "").trim().split("\n");
    for (const line of lines.slice(0, -1)) console.log(line);
    let result;
    try {
      result = JSON.parse(lines.at(-1));
    } catch {
      const why = r.error ? String(r.error.message) : r.signal ? `killed by ${r.signal}` : `exit ${r.status}`;
      summary.crashed.push({ kernel, why, stderr: (r.stderr ?? "").trim().split("\n").slice(-4).join(" | ") });
      console.log(`CRASH ${kernel}: ${why}: ${(r.stderr ?? "").trim().split("\n").slice(-4).join(" | ")}`);
      continue;
    }
    summary.device = result.device;
    summary.libraries = result.libraries;
    const counts = result.passes.reduce((acc, p) => ({ passed: acc.passed + p.passed, failed: acc.failed + p.failed, skipped: acc.skipped + p.skipped }), { passed: 0, failed: 0, skipped: 0 });
    summary.kernels[kernel] = { ...counts, seconds: result.passes.reduce((s, p) => s + p.seconds, 0) };
    for (const k of Object.keys(counts)) summary.totals[k] += counts[k];
  }
  console.log(JSON.stringify(summary));
  process.exit(summary.totals.failed || summary.crashed.length ? 1 : 0);
}

const backend = values.sim ? createCudaSimBackend() : createCudaBackend({ device: Number(values.device ?? 0) });
const caps = backend.capabilities();
const filter = (c) => (!values.kernel || values.kernel.split(",").includes(c.kernel)) && (!values.filter || caseName(c).includes(values.filter));
const summary = { device: caps.device.name, computeCapability: caps.device.computeCapability, libraries: caps.device.libraries ?? "none", archs: status.addon.archs, passes: [] };
let failed = 0;
for (let pass = 0; pass < passes; pass++) {
  const t0 = performance.now();
  const outcomes = await checkConformance(backend, { filter, prepared: values.prepared === true });
  const counts = { passed: 0, failed: 0, skipped: 0 };
  for (const o of outcomes) {
    counts[o.status]++;
    if (o.status === "failed") console.log(`FAIL (pass ${pass + 1}) ${o.name}\n  ${o.details.slice(0, 4).join("\n  ")}`);
  }
  failed += counts.failed;
  summary.passes.push({ ...counts, seconds: (performance.now() - t0) / 1000 });
}
summary.memory = backend.memoryStats();
console.log(JSON.stringify(summary));
backend.dispose();
process.exit(failed ? 1 : 0);
