#!/usr/bin/env node
// kiln against itself on a machine whose cores other processes keep busy: `kiln train` of
// models/nano-start.yaml for a fixed number of steps (--headless), and optionally `kiln sample`
// from the checkpoint it writes, each a fresh process timed from spawn to exit (what a user
// waits for), with 0, 1, 2 ... background busy-loop processes beside it. Every round runs the
// default thread count and --threads 1 one after the other (alternating which goes first), so
// both see the same load; the figures are medians over the rounds. With --against DIR, a
// second build of @kiln/kernels-wasm (a copy of another checkout's packages/kernels-wasm/dist)
// is run too, in the same rounds: the CLI is the same, only the kernel package differs (both
// builds are then loaded through the same module resolve hook, which costs each start the same).
//
//   node tooling/bench/busy-cores.mjs [--spinners 0,1,2] [--rounds 5] [--steps 10]
//                                     [--sample] [--sample-tokens 200] [--against DIR]
//
// Prints one JSON line per command, build and spinner count: median seconds with the default
// threads and with --threads 1, their ratio (default / 1 thread), the trainer's last logged
// it/s (train) and every round's figure. Needs packages/cli and packages/kernels-wasm built.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath, pathToFileURL } from "node:url";
import { median } from "./lib/train-runs.mjs";

const { values } = parseArgs({
  options: {
    spinners: { type: "string", default: "0,1,2" },
    rounds: { type: "string", default: "5" },
    steps: { type: "string", default: "10" },
    sample: { type: "boolean", default: false },
    "sample-tokens": { type: "string", default: "200" },
    against: { type: "string" },
  },
});

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const kiln = path.join(repo, "packages/cli/dist/bin/kiln.js");
const config = path.join(repo, "models/nano-start.yaml");
const rounds = Number(values.rounds);
const work = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-busy-cores-"));

/** Node flags that make `@kiln/kernels-wasm` resolve to `dist`'s index.js (none: the workspace's own). */
function buildFlags(dist) {
  if (!dist) return [];
  const target = pathToFileURL(path.join(path.resolve(dist), "index.js")).href;
  const hooks = `export async function resolve(s, c, next) { return s === "@kiln/kernels-wasm" ? { url: ${JSON.stringify(target)}, shortCircuit: true } : next(s, c); }`;
  const register = `import { register } from "node:module"; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});`;
  return ["--import", `data:text/javascript,${encodeURIComponent(register)}`];
}
// With --against, this build goes through the same resolve hook (it adds about 0.25 s to a start).
const builds = { this: buildFlags(values.against ? path.join(repo, "packages/kernels-wasm/dist") : undefined) };
if (values.against) builds.against = buildFlags(values.against);

/** Runs kiln with `args`; returns wall seconds and its stdout, or throws with its stderr. */
function kilnRun(flags, args) {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [...flags, kiln, ...args], { encoding: "utf8", maxBuffer: 1 << 26 });
  const seconds = (performance.now() - t0) / 1000;
  if (r.status !== 0) throw new Error(`kiln ${args.join(" ")} exited with ${r.status}: ${r.stderr}`);
  return { seconds, stdout: r.stdout };
}

const threadArgs = (threads) => (threads === "default" ? [] : ["--threads", threads]);
let runs = 0;
const commands = {
  train(flags, threads) {
    const out = path.join(work, `train-${runs++}`);
    const { seconds, stdout } = kilnRun(flags, ["train", "-f", config, "--max-steps", values.steps, "--headless", "--output-dir", out, ...threadArgs(threads)]);
    const lines = stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
    const last = lines.filter((l) => typeof l.grad_norm === "number").at(-1);
    fs.rmSync(out, { recursive: true, force: true });
    return { seconds, itPerS: last?.["it/s"], loss: last?.loss };
  },
  sample(flags, threads) {
    const { seconds, stdout } = kilnRun(flags, ["sample", "--checkpoint", checkpoint, "--max-tokens", values["sample-tokens"], "--seed", "1", ...threadArgs(threads)]);
    return { seconds, text: stdout };
  },
};

// One checkpoint for sample, trained idle.
const checkpointDir = path.join(work, "checkpoint");
const checkpoint = path.join(checkpointDir, "final.safetensors");
if (values.sample) kilnRun([], ["train", "-f", config, "--max-steps", values.steps, "--headless", "--output-dir", checkpointDir]);
const which = values.sample ? ["train", "sample"] : ["train"];

const spin = () => spawn(process.execPath, ["-e", "for (;;);"], { stdio: "ignore" });
const r3 = (x) => (x === undefined ? undefined : Number(x.toFixed(3)));
try {
  for (const spinners of values.spinners.split(",").map(Number)) {
    const busy = Array.from({ length: spinners }, spin);
    try {
      await new Promise((resolve) => setTimeout(resolve, 200)); // let the spinners start
      for (const command of which) {
        const results = {};
        const configs = Object.keys(builds).flatMap((b) => ["default", "1"].map((t) => [b, t]));
        for (const [b, t] of configs) results[`${b}/${t}`] = [];
        for (let r = 0; r < rounds; r++) {
          const order = r % 2 === 0 ? configs : [...configs].reverse();
          for (const [b, t] of order) results[`${b}/${t}`].push(commands[command](builds[b], t));
        }
        for (const b of Object.keys(builds)) {
          const def = results[`${b}/default`], one = results[`${b}/1`];
          const sDef = median(def.map((x) => x.seconds)), sOne = median(one.map((x) => x.seconds));
          const row = { command, build: b, spinners, default_s: r3(sDef), one_thread_s: r3(sOne), ratio: r3(sDef / sOne) };
          if (command === "train") {
            row.default_it_s = r3(median(def.map((x) => x.itPerS)));
            row.one_thread_it_s = r3(median(one.map((x) => x.itPerS)));
            row.same_loss = [...def, ...one].every((x) => x.loss === def[0].loss);
          } else {
            row.same_text = [...def, ...one].every((x) => x.text === def[0].text);
          }
          row.rounds = { default_s: def.map((x) => r3(x.seconds)), one_thread_s: one.map((x) => r3(x.seconds)) };
          console.log(JSON.stringify(row));
        }
      }
    } finally {
      for (const p of busy) p.kill();
    }
  }
} finally {
  fs.rmSync(work, { recursive: true, force: true });
}
