// Data parallel between two hosts of this box (network namespaces joined by a bridge, each
// with its own address: tooling/netns), as root:
//  1. all-reduce, reduce-scatter and all-gather bandwidth between the hosts for each sync
//     backend that crosses machines: kiln's cpu sync over TCP (a star through rank 0) and
//     Gloo's TCP ring (allreduce-cpu.mjs's measurement, its ranks in the two namespaces);
//  2. the step time of bench-tiny (models/bench-tiny.yaml) on 2 hosts x 1 rank (batch 4 each,
//     1 thread each) against 1 host x 1 rank (batch 8, 2 threads), the same global batch:
//     kiln train's median it/s over the logged steps after the first, as a ratio.
// Usage: sudo node tooling/bench/hosts-sync.mjs [--mb 100] [--calls 5] [--steps 30]
// Needs the workspace built (pnpm turbo run build).
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { NetworkHosts, hostsUnavailable } from "../netns/network-hosts.js";

const { values } = parseArgs({ options: { mb: { type: "string", default: "100" }, calls: { type: "string", default: "5" }, steps: { type: "string", default: "30" } } });
const why = hostsUnavailable();
if (why) {
  console.error(`hosts-sync: ${why}`);
  process.exit(1);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const kiln = path.join(here, "..", "..", "packages", "cli", "dist", "bin", "kiln.js");
const net = NetworkHosts.create(2, "hb");

/** Runs `args` (node and a script) on host i, resolving to its stdout. */
function onHost(i, args, env = {}) {
  const [command, ...rest] = [...net.prefix(i), process.execPath, ...args];
  return new Promise((resolve, reject) => {
    const child = spawn(command, rest, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (s) => (out += s));
    child.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`host ${i}: exit ${code}`))));
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const report = { machine: `${os.cpus()[0].model.trim()}, ${os.availableParallelism()} cores`, hosts: net.hosts.map((h) => h.address), allreduce: [], reducescatter: [], allgather: [], step: {} };
try {
  const bytes = Math.round((Number(values.mb) * 1e6) / 4) * 4;
  for (const [sync, port] of [["tcp", 29600], ["gloo", 29601]]) {
    const env = (r) => ({ BENCH_RANK: String(r), BENCH_PORT: String(port), BENCH_SYNC: sync, BENCH_HOST: net.hosts[0].address, BENCH_RANKS: "2", BENCH_BYTES: String(bytes), BENCH_CALLS: values.calls, BENCH_COLLECTIVES: "allreduce,reducescatter,allgather" });
    const [out] = await Promise.all([0, 1].map((r) => onHost(r, [path.join(here, "allreduce-cpu.mjs")], env(r))));
    for (const line of out.trim().split("\n").filter((l) => l.startsWith("{"))) {
      const figure = JSON.parse(line);
      report[figure.collective].push(figure);
    }
  }

  const dir = mkdtempSync(path.join(os.tmpdir(), "kiln-hosts-sync-"));
  const train = ["train", "-f", path.join(here, "..", "..", "models", "bench-tiny.yaml"), "--max-steps", values.steps, "--log-interval", "1", "--eval-interval", "100000", "--save-interval", "100000", "--headless", "--target-device", "cpu"];
  const itPerSecond = (out) => median(out.trim().split("\n").map((l) => JSON.parse(l)).filter((l) => l["it/s"] !== undefined).slice(1).map((l) => l["it/s"]));
  const one = await onHost(0, [kiln, ...train, "--batch-size", "8", "--threads", "2", "--output-dir", path.join(dir, "one")]);
  const two = await Promise.all(
    [0, 1].map((r) => onHost(r, [kiln, ...train, "--batch-size", "4", "--threads", "1", "--sync-backend", "cpu", "--nnodes", "2", "--node-rank", String(r), "--master-addr", net.hosts[0].address, "--master-port", "29602", "--output-dir", path.join(dir, "two")])),
  );
  rmSync(dir, { recursive: true, force: true });
  const [a, b] = [1000 / itPerSecond(one), 1000 / itPerSecond(two[0])];
  report.step = { one_host_ms: a, two_hosts_ms: b, two_hosts_over_one: b / a, command: `kiln ${train.join(" ")} (batch 8 on one host; batch 4 on each of two, --nnodes 2)` };
} finally {
  net.remove();
}
console.log(JSON.stringify(report, null, 2));
