import type { DoctorReport } from "./gather.js";

const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(1)} GiB`;
const found = (path: string | null, what: string) => (path ? `found (${path})` : `not found (${what})`);

/** The report as aligned "label  value" lines. */
export function formatDoctorReport(r: DoctorReport): string {
  const rows: [string, string][] = [
    ["node", `${r.node.version} (${r.node.platform}-${r.node.arch})`],
    ["cpu", `${r.cpu.model}, ${r.cpu.cores} cores, ${gib(r.cpu.memoryBytes)}`],
    [
      "cpu kernels",
      r.wasm.ok
        ? `WebAssembly ${r.wasm.simd}, ${r.wasm.threads} thread${r.wasm.threads === 1 ? "" : "s"}${r.wasm.sharedMemory ? "" : " (no shared memory)"}${r.wasm.note ? ` — ${r.wasm.note}` : ""}`
        : `unavailable: ${r.wasm.error}`,
    ],
    ...(r.wasm.ok
      ? [["native kernels", r.wasm.native.kernels.length > 0 ? `${r.wasm.native.kernels.join(", ")} (${r.wasm.native.isa}); the others in WebAssembly` : `none: ${r.wasm.native.reason ?? "unknown"}`] as [string, string]]
      : []),
    ...(r.wasm.ok
      ? [["cpu peak", `${(r.wasm.peak.flopsPerSecond / 1e9).toFixed(1)} GFLOP/s f32 on ${r.wasm.threads} thread${r.wasm.threads === 1 ? "" : "s"}, for MFU (${r.wasm.peak.cached ? "measured" : "measured now"} ${r.wasm.peak.measuredAt.slice(0, 16).replace("T", " ")} UTC, kept in ${r.wasm.peak.file})`] as [string, string]]
      : []),
    ...cudaRows(r.cuda),
    ["sync backends", syncRow(r.sync, r.cuda)],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  const verdict = r.wasm.ok
    ? `ready: kiln can train on the CPU${"driver" in r.cuda && r.cuda.addon.built && r.cuda.runtime.deviceCount > 0 ? " and the GPU" : ""}`
    : "not ready: the CPU kernels did not load (see above)";
  return [...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`), "", verdict].join("\n");
}

const withVersion = (text: string, version: string | undefined) => (version ? `${text}, ${version}` : text);

function cudaRows(c: DoctorReport["cuda"]): [string, string][] {
  if (!("driver" in c)) return [["gpu", c.missing]];
  return [
    ["nvidia driver", c.driver.found ? c.driver.detail : `not found: ${c.driver.detail}`],
    ["gpu kernels", c.addon.built ? `built for sm_${c.addon.archs.join(", sm_")} (${c.addon.detail.split(" ")[0]})` : `not built: ${c.addon.detail}`],
    ["gpus", c.addon.built ? (c.runtime.deviceCount > 0 ? `${c.runtime.deviceCount} visible` : `none usable: ${c.runtime.error}`) : "unknown until the CUDA kernels are built"],
    ["cuda simulator", c.simulator.built ? `built (KILN_BACKEND=cuda-sim runs the CUDA kernels on this CPU)` : `not built: ${c.simulator.detail}`],
    [
      "cuBLASLt",
      withVersion(found(c.libraries.cublasLt, "libcublasLt.so"), c.libraryVersions.cublasLt) +
        (c.libraries.cublasLt ? "; GPU matmuls go through it (KILN_MATMUL_PATH=kiln: kiln's own kernels)" : "; without it GPU matmuls run on kiln's own kernels"),
    ],
    ["NCCL", withVersion(found(c.libraries.nccl, "libnccl.so.2"), c.libraryVersions.nccl) + "; the default sync of GPU ranks (--gpus 0,1); without it they sync through the host"],
  ];
}

/** Which --sync-backend values this machine can use. */
function syncRow(sync: DoctorReport["sync"], cuda: DoctorReport["cuda"]): string {
  const cpu = sync.sharedMemory.available ? "cpu (ranks on this machine through shared memory, others over TCP): available" : `cpu: available over TCP only (no shared memory: ${sync.sharedMemory.reason})`;
  const gloo = sync.gloo.available ? "gloo (Gloo's TCP ring; the default across machines): available" : `gloo: not available (${sync.gloo.reason})`;
  const nccl = !("driver" in cuda) ? `nccl: not available (${cuda.missing})` : cuda.nccl.found ? `nccl (GPU ranks, --gpus): available, NCCL ${cuda.nccl.version}` : `nccl: not available (${cuda.nccl.problem})`;
  return `${cpu}; ${gloo}; ${nccl}`;
}
