import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rename, rm } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { metricsLog, stepCheckpoints } from "./support/checkpoints.js";
import { REPO_ROOT } from "./support/paths.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// TensorBoard itself (the Python package, installed offline from wheels on disk) reads the event
// files of kiln train: tooling/tensorboard-scalars.py prints what its data ingester and scalars
// data provider serve, and what its event file loader reads file by file.
// The wheels: $KILN_TEST_WHEELS, else /opt/pypi/files. The venv is kept between runs under
// node_modules/.cache, keyed by the Python and the wheels it was made from.
const WHEELS = process.env.KILN_TEST_WHEELS ?? "/opt/pypi/files";
const SCRIPT = path.join(REPO_ROOT, "tooling", "tensorboard-scalars.py");
const VENV_CACHE = path.join(REPO_ROOT, "node_modules", ".cache", "kiln-test-tensorboard-venv");

/** metrics.jsonl key -> TensorBoard tag, for the metrics a dense model logs (TENSORBOARD_TAGS in src/train/tensorboard-log.ts). */
const TAGS: Record<string, string> = {
  loss: "loss",
  val_loss: "val_loss",
  learning_rate: "learning_rate",
  grad_norm: "grad_norm",
  "tokens/s": "tokens_per_second",
  mfu: "mfu",
};

type Pair = [number, number];
interface TensorBoardRead {
  /** run -> tag -> (step, value), as TensorBoard's scalars data provider serves them. */
  runs: Record<string, Record<string, Pair[]>>;
  /** event file -> (step, tag, value) of every scalar, as its event file loader reads them. */
  events: Record<string, [number, string, number][]>;
  file_versions: Record<string, string[]>;
}

function run(cmd: string, args: string[], timeout = 60_000) {
  const r = spawnSync(cmd, args, { encoding: "utf8", timeout, maxBuffer: 64 << 20 });
  const output = `${r.stdout ?? ""}${r.stderr ?? ""}${r.error ? String(r.error) : ""}`;
  return { ok: r.status === 0, stdout: r.stdout ?? "", stderr: r.stderr ?? "", output };
}

const lastLine = (s: string) => s.trim().split("\n").at(-1) ?? "";

/** The Python 3 that makes the venv, as `<executable> <version>`; or why there is none. */
function pythonInfo(): { id: string } | { missing: string } {
  const r = run("python3", ["-c", "import sys, venv, ensurepip; print(sys.executable, sys.version)"], 20_000);
  if (!r.ok) return { missing: `python3 with venv and ensurepip is not available (${lastLine(r.output) || "no python3 on PATH"})` };
  return { id: r.stdout.trim() };
}

const python = pythonInfo();
const wheels = existsSync(WHEELS) ? readdirSync(WHEELS).filter((n) => n.endsWith(".whl")).sort() : [];
const skipReason =
  "missing" in python
    ? python.missing
    : !wheels.some((n) => /^tensorboard-\d/.test(n))
      ? `no tensorboard wheel in ${WHEELS} (set KILN_TEST_WHEELS to a folder of wheels)`
      : undefined;

/**
 * A venv with tensorboard installed offline from WHEELS: made in a temp folder and renamed into
 * the cache when complete (a venv runs from a new path through its bin/python; its scripts are not used),
 * so a half-made venv is never reused and two runs at once each keep a whole one.
 */
async function tensorboardVenv(): Promise<{ python: string } | { missing: string }> {
  const key = createHash("sha256")
    .update(JSON.stringify(["id" in python ? python.id : "", WHEELS, wheels]))
    .digest("hex")
    .slice(0, 16);
  const venv = path.join(VENV_CACHE, key);
  const bin = (dir: string) => path.join(dir, "bin", "python");
  if (existsSync(venv)) {
    if (run(bin(venv), ["-c", "import tensorboard"]).ok) return { python: bin(venv) };
    await rm(venv, { recursive: true, force: true });
  }
  await mkdir(VENV_CACHE, { recursive: true });
  const temp = await mkdtemp(path.join(VENV_CACHE, `.${key}-`));
  try {
    const made = run("python3", ["-m", "venv", temp]);
    if (!made.ok) return { missing: `python3 -m venv failed (${lastLine(made.output)})` };
    const pip = run(bin(temp), ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index", "--find-links", WHEELS, "tensorboard"], 120_000);
    if (!pip.ok) {
      // A dependency with no wheel in WHEELS is the environment's lack, not kiln's failure.
      if (/No matching distribution|Could not find a version/.test(pip.output)) return { missing: `tensorboard cannot be installed from ${WHEELS}: ${lastLine(pip.output)}` };
      throw new Error(`pip install tensorboard failed:\n${pip.output}`);
    }
    try {
      await rename(temp, venv);
    } catch (err) {
      // Another run put its venv there first: use that one.
      if (!existsSync(venv)) throw err;
    }
    return { python: bin(venv) };
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
}

/** What TensorBoard reads from `logdir`. */
function tensorboardRead(pythonBin: string, logdir: string): TensorBoardRead {
  const r = run(pythonBin, [SCRIPT, logdir]);
  if (!r.ok) throw new Error(`${SCRIPT} failed:\n${r.output}`);
  // TensorBoard logs a warning when it skips a damaged record or purges events.
  expect(r.stderr).not.toMatch(/purg|out of order|corrupt|truncat/i);
  return JSON.parse(r.stdout) as TensorBoardRead;
}

/** (step, value) of one metrics.jsonl key. */
function metricPoints(lines: Record<string, unknown>[], key: string): Pair[] {
  return lines.filter((l) => typeof l[key] === "number").map((l): Pair => [l.step as number, l[key] as number]);
}

/** The same steps in order; each value a float32, within rounding of the metrics.jsonl value (kept there to 6 significant digits). */
function expectSamePoints(tag: string, actual: Pair[], expected: Pair[]) {
  expect(actual.map(([s]) => s), `${tag} steps`).toEqual(expected.map(([s]) => s));
  actual.forEach(([step, v], i) => {
    expect(Math.fround(v), `${tag} at step ${step} is a float32`).toBe(v);
    expect(Math.abs(v - expected[i][1]), `${tag} at step ${step}: ${v} vs ${expected[i][1]}`).toBeLessThanOrEqual(1e-5 * Math.abs(expected[i][1]) + 1e-12);
  });
}

let ws: Workspace;
let tensorboard: { python: string } | { missing: string };
beforeAll(async () => {
  ws = await Workspace.create("tensorboard-python");
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 5, log_interval: 1, eval_interval: 2, eval_iters: 1, save_interval: 2 } });
  await ws.writeTokens("data.bin", textTokens(3000));
  if (skipReason === undefined) tensorboard = await tensorboardVenv();
}, 150_000);
afterAll(() => ws.remove());

/** The venv's python, or the test skipped with why there is none. */
function tensorboardPython(ctx: { skip: (note?: string) => never }): string {
  if ("missing" in tensorboard) ctx.skip(tensorboard.missing);
  return (tensorboard as { python: string }).python;
}

const train = async (...args: string[]) =>
  expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "out", "--headless", ...args]), `kiln train ${args.join(" ")}`);

/** The metrics.jsonl keys that the run logged, with their tags. */
async function loggedTags(): Promise<{ lines: Record<string, unknown>[]; tags: [string, string][] }> {
  const lines = await metricsLog(ws.path("out"));
  return { lines, tags: Object.entries(TAGS).filter(([key]) => lines.some((l) => typeof l[key] === "number")) };
}

describe(`TensorBoard (the Python package) reads kiln's event files${skipReason ? ` (skipped: ${skipReason})` : ""}`, () => {
  it.skipIf(skipReason !== undefined)("serves every logged metric under its tag, at its steps, with its value", async (ctx) => {
    const pythonBin = tensorboardPython(ctx);
    await train();
    const read = tensorboardRead(pythonBin, ws.path("out", "tensorboard"));
    const { lines, tags } = await loggedTags();
    expect(tags.map(([, tag]) => tag).sort()).toEqual(["grad_norm", "learning_rate", "loss", "mfu", "tokens_per_second", "val_loss"]);
    // One run: the folder itself, holding exactly the logged tags.
    expect(Object.keys(read.runs)).toEqual(["."]);
    const served = read.runs["."];
    expect(Object.keys(served).sort()).toEqual(tags.map(([, tag]) => tag).sort());
    expect(served.loss.map(([s]) => s)).toEqual([1, 2, 3, 4, 5]);
    expect(served.val_loss.map(([s]) => s)).toEqual([2, 4, 5]);
    for (const [key, tag] of tags) expectSamePoints(tag, served[tag], metricPoints(lines, key));
    // The file as its loader reads it: a brain.Event:2 header, then the same scalars.
    const files = Object.keys(read.events);
    expect(files).toHaveLength(1);
    expect(read.file_versions[files[0]]).toEqual(["brain.Event:2"]);
    for (const [key, tag] of tags) {
      const loaded = read.events[files[0]].filter(([, t]) => t === tag).map(([s, , v]): Pair => [s, v]);
      expectSamePoints(tag, loaded, metricPoints(lines, key));
    }
  });

  it.skipIf(skipReason !== undefined)("after --resume, reads each step once, across both runs' files", async (ctx) => {
    const pythonBin = tensorboardPython(ctx);
    // As if the first run had stopped after its step 2 checkpoint but logged steps 3 to 5.
    expect((await stepCheckpoints(ws.path("out"))).map((c) => c.step)).toEqual([2, 4, 5]);
    await Promise.all([4, 5].map((step) => rm(ws.path("out", `step_${step}.safetensors`))));
    await train("--resume", "auto", "--max-steps", "6");
    const read = tensorboardRead(pythonBin, ws.path("out", "tensorboard"));
    const { lines, tags } = await loggedTags();
    expect(Object.keys(read.runs)).toEqual(["."]);
    const served = read.runs["."];
    expect(served.loss.map(([s]) => s)).toEqual([1, 2, 3, 4, 5, 6]);
    for (const [key, tag] of tags) expectSamePoints(tag, served[tag], metricPoints(lines, key));
    // TensorBoard purges nothing from brain.Event:2 files (a step logged twice would show twice):
    // the files, in the order it reads them, hold each (tag, step) once, rising.
    const files = Object.keys(read.events).sort();
    expect(files).toHaveLength(2);
    for (const file of files) expect(read.file_versions[file]).toEqual(["brain.Event:2"]);
    const all = files.flatMap((f) => read.events[f]);
    for (const [key, tag] of tags) {
      const loaded = all.filter(([, t]) => t === tag).map(([s, , v]): Pair => [s, v]);
      expectSamePoints(tag, loaded, metricPoints(lines, key));
    }
    expect(read.events[files[0]].filter(([, t]) => t === "loss").map(([s]) => s)).toEqual([1, 2]);
    expect(read.events[files[1]].filter(([, t]) => t === "loss").map(([s]) => s)).toEqual([3, 4, 5, 6]);
  });

  it.skipIf(skipReason !== undefined)("after --resume, reads the steps in order even when the earlier file's name holds a later time", async (ctx) => {
    const pythonBin = tensorboardPython(ctx);
    // TensorBoard reads a folder's files in name order. An earlier run's file can sort after a
    // new one by time alone: the same second and a pid with more digits, or a clock set back.
    const resumed = await Workspace.copyOf("tensorboard-python-names", ws);
    try {
      const dir = resumed.path("out", "tensorboard");
      await Promise.all((await readdir(dir)).map((n) => rm(path.join(dir, n))));
      await rm(resumed.path("out", "metrics.jsonl"));
      await rm(resumed.path("out", "final.safetensors"), { force: true });
      await Promise.all((await stepCheckpoints(resumed.path("out"))).map((c) => rm(c.file)));
      expectSuccess(await resumed.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "out", "--headless", "--max-steps", "2"]), "kiln train --max-steps 2");
      const [first] = await readdir(dir);
      const ahead = Math.floor(Date.now() / 1000) + 3600;
      await rename(path.join(dir, first), path.join(dir, first.replace(/^(events\.out\.tfevents\.)\d+/, `$1${ahead}`)));
      expectSuccess(await resumed.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "out", "--headless", "--resume", "auto", "--max-steps", "4"]), "kiln train --resume auto");
      const read = tensorboardRead(pythonBin, dir);
      expect(read.runs["."].loss.map(([s]) => s)).toEqual([1, 2, 3, 4]);
      const lines = await metricsLog(resumed.path("out"));
      expectSamePoints("loss", read.runs["."].loss, metricPoints(lines, "loss"));
    } finally {
      await resumed.remove();
    }
  });
});
