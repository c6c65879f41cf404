import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { cp, mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { generateStories, readGgufHeader } from "@kiln/core";
import { globSync } from "tinyglobby";
import { parse, stringify } from "yaml";
import { type CommandRule, ruleFor } from "./doc-command-rules.js";
import type { KilnResult } from "./kiln-process.js";
import { type DocCommand, type ShellWord, fencedBlocks } from "./markdown-commands.js";
import { MODELS_DIR, REPO_ROOT } from "./paths.js";
import { Workspace } from "./workspace.js";

/*
 * How a documented kiln command runs in the test, so that every guide runs in seconds:
 *
 * - `kiln train` gets `--max-steps 2 --eval-iters 1` appended (the last value of a flag
 *   wins): two optimizer steps, one evaluation batch, the checkpoints a full run writes.
 * - On the CPU, a config of more than 2M parameters (nano, gpt2-small: one of their steps
 *   takes seconds to minutes there, and their checkpoints hundreds of megabytes) trains
 *   from a copy whose model is cut to one layer of width 32 (same architecture, vocabulary
 *   and sequence length), with `--batch-size 1 --seq-len 32 --grad-accum 1` appended. The
 *   command's flags, data and output folder are as written; `kiln estimate` of the file as
 *   shipped (which this test runs to count its parameters) checks the file itself.
 * - A GPU command (`--target-device gpu`) runs as written on a machine with a usable GPU.
 *   Without one it must stop with kiln's `DeviceError` for --target-device gpu: kiln
 *   resolves the config, every flag, the output folder and the data before it opens the
 *   device, so the command is checked up to the GPU itself.
 * - `KILN_BACKEND=cuda-sim` commands run on the simulator where it is built, and must
 *   stop with a `DeviceError` where it is not.
 * - `kiln sample` gets `--max-tokens 16`; `kiln dashboard` gets `--port 0` (a free port),
 *   must serve its page, and is stopped with SIGINT (Ctrl-C).
 * - A command whose comment says `# error: <Kind>` must exit non-zero with that kind of
 *   error; `# not available yet ...` must be refused with kiln's "not available yet". These
 *   run as written, apart from the step limit.
 * Every other command must exit 0.
 */
export const STEP_LIMIT = ["--max-steps", "2", "--eval-iters", "1"];
export const SMALL_BATCH = ["--batch-size", "1", "--seq-len", "32", "--grad-accum", "1"];
export const SAMPLE_LIMIT = ["--max-tokens", "16"];
export const LARGE_MODEL_PARAMETERS = 2_000_000;
const SMALL_MODEL = { hidden_size: 32, num_layers: 1, num_heads: 2 };
const COMMAND_TIMEOUT_MS = 120_000;

/** What kiln can use on the machine running the tests (from `kiln doctor --json`). */
export interface Machine {
  gpuUsable: boolean;
  simulatorBuilt: boolean;
}

export function machineFromDoctor(json: string): Machine {
  const report = JSON.parse(json) as { cuda?: { addon?: { built?: boolean }; runtime?: { deviceCount?: number }; simulator?: { built?: boolean } } };
  return {
    gpuUsable: report.cuda?.addon?.built === true && (report.cuda.runtime?.deviceCount ?? 0) > 0,
    simulatorBuilt: report.cuda?.simulator?.built === true,
  };
}

type Expectation = { outcome: "success" } | { outcome: "refused"; stderr: RegExp; why: string };

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * A document's workspace: `models/` (the repository's configs), `corpus/` (text standing
 * for the reader's own files) and `chats.jsonl` (conversations standing for theirs).
 */
export async function documentWorkspace(label: string): Promise<Workspace> {
  const ws = await Workspace.create(label);
  await cp(MODELS_DIR, ws.path("models"), { recursive: true });
  await mkdir(ws.path("corpus"));
  const text = [...generateStories(2, 120_000)].join("\n");
  await ws.write(path.join("corpus", "stories-1.txt"), text.slice(0, text.length / 2));
  await ws.write(path.join("corpus", "stories-2.txt"), text.slice(text.length / 2));
  const chats = [...generateStories(3, 40_000)].map((story) => ({ messages: [{ role: "user", content: "Tell me a story." }, { role: "assistant", content: story.slice(0, 90) }] }));
  await ws.write("chats.jsonl", chats.map((c) => `${JSON.stringify(c)}\n`).join(""));
  return ws;
}

function flagValue(args: readonly string[], ...names: string[]): string | undefined {
  let value: string | undefined;
  args.forEach((a, i) => {
    for (const n of names) {
      if (a === n) value = args[i + 1];
      else if (a.startsWith(`${n}=`)) value = a.slice(n.length + 1);
    }
  });
  return value;
}

/** Runs the kiln commands of one document in order, in its workspace; throws on the first that does not do what it should. */
export class DocumentRun {
  constructor(
    private readonly ws: Workspace,
    private readonly cacheDir: string,
    private readonly machine: Machine,
    /** Parameters of configs by content hash, shared between documents. */
    private readonly parameterCounts: Map<string, number>,
  ) {}

  async run(cmd: DocCommand): Promise<void> {
    const rule = ruleFor(cmd);
    if (rule.kind === "developer") return rule.check();
    const words = this.expand(cmd, cmd.words);
    if (rule.kind === "file-command") {
      execFileSync(words[0], words.slice(1), { cwd: this.ws.dir, stdio: "pipe" });
      return;
    }
    if (rule.kind === "ollama") return this.ollama(cmd, rule);
    if (rule.kind === "tensorboard") {
      const dir = this.ws.path(rule.logdir);
      if (!existsSync(dir) || !readdirSync(dir).some((f) => f.startsWith("events.out.tfevents."))) this.fail(cmd, `${rule.logdir} holds no TensorBoard event file`);
      return;
    }
    await this.runKiln(cmd, words.slice(rule.words));
  }

  /** Ollama's models created so far in this document. */
  private readonly ollamaModels = new Set<string>();

  private async ollama(cmd: DocCommand, rule: Extract<CommandRule, { kind: "ollama" }>): Promise<void> {
    if (rule.action === "run") {
      if (!this.ollamaModels.has(rule.model)) this.fail(cmd, `no ollama create made ${rule.model} before this command`);
      return;
    }
    const blocks = fencedBlocks(await readFile(path.join(REPO_ROOT, cmd.file), "utf8"), "Modelfile");
    if (blocks.length !== 1) this.fail(cmd, `the document has ${blocks.length} Modelfile blocks; ollama create needs exactly one`);
    await this.ws.write(rule.modelfile!, blocks[0]);
    const from = /^FROM\s+(\S+)\s*$/m.exec(blocks[0])?.[1];
    if (!from) this.fail(cmd, "the Modelfile block has no FROM line");
    const gguf = path.join(path.dirname(this.ws.path(rule.modelfile!)), from);
    const header = await readGgufHeader(gguf).catch((err: Error) => this.fail(cmd, `the Modelfile's FROM ${from} is not a GGUF file kiln reads: ${err.message}`));
    if (header.metadata.get("general.architecture")?.type !== "string") this.fail(cmd, `${from} names no general.architecture`);
    this.ollamaModels.add(rule.model);
  }

  private fail(cmd: DocCommand, why: string, r?: KilnResult, ran?: string[]): never {
    const detail = r ? `\n  ran: kiln ${ran?.join(" ")}\n  exit: ${r.code ?? r.signal}\n  stderr:\n${r.stderr}` : "";
    throw new Error(`${cmd.file}:${cmd.line}: ${why}\n  command: ${cmd.written}${detail}`);
  }

  /** Words with globs expanded in the workspace, as the shell would. */
  private expand(cmd: DocCommand, words: readonly ShellWord[]): string[] {
    return words.flatMap((w) => {
      if (typeof w === "string") return [w];
      const matches = globSync(w.glob, { cwd: this.ws.dir }).sort();
      if (matches.length === 0) this.fail(cmd, `${w.glob} matches no file`);
      return matches;
    });
  }

  private expectation(cmd: DocCommand, args: readonly string[]): Expectation {
    const error = /^error: (\w+)/.exec(cmd.comment ?? "");
    if (error) return { outcome: "refused", stderr: new RegExp(`^kiln: ${error[1]} in `, "m"), why: `the comment says it fails with a ${error[1]}` };
    if (/^not available yet/.test(cmd.comment ?? "")) return { outcome: "refused", stderr: /not available yet/, why: "the comment says it is not available yet" };
    const subcommand = args[0]?.startsWith("-") ? "train" : args[0];
    if (subcommand === "train" && flagValue(args, "--target-device") === "gpu" && !this.machine.gpuUsable) {
      return { outcome: "refused", stderr: /^kiln: DeviceError in --target-device gpu: /m, why: "no usable GPU here: it must get as far as opening the GPU" };
    }
    if (cmd.env.KILN_BACKEND === "cuda-sim" && !this.machine.simulatorBuilt) return { outcome: "refused", stderr: /^kiln: DeviceError/m, why: "the CUDA simulator is not built here" };
    return { outcome: "success" };
  }

  private async parameters(config: string): Promise<number> {
    const text = await readFile(this.ws.path(config), "utf8");
    const key = createHash("sha256").update(text).digest("hex");
    const known = this.parameterCounts.get(key);
    if (known !== undefined) return known;
    const r = await this.ws.run(["estimate", "-f", config, "--json"], { cacheDir: this.cacheDir });
    if (r.code !== 0) throw new Error(`kiln estimate -f ${config} --json exited ${r.code}:\n${r.stderr}`);
    const count = (JSON.parse(r.stdout) as { parameters: number }).parameters;
    this.parameterCounts.set(key, count);
    return count;
  }

  /** A copy of a config with its model cut to SMALL_MODEL, under the same file name (so the default output folder is the same). */
  private async smallCopy(config: string): Promise<string> {
    const doc = parse(await readFile(this.ws.path(config), "utf8")) as { model: Record<string, unknown> };
    const model: Record<string, unknown> = { ...doc.model, ...SMALL_MODEL };
    if ("kv_heads" in model) model.kv_heads = 1;
    if ("intermediate_size" in model) model.intermediate_size = 64;
    const copy = path.join(".doc-test-small-configs", path.basename(config));
    await mkdir(this.ws.path(path.dirname(copy)), { recursive: true });
    await writeFile(this.ws.path(copy), stringify({ ...doc, model }));
    return copy;
  }

  /** The arguments the test runs a documented kiln command with (see the comment at the top). */
  private async testArgs(args: readonly string[], expected: Expectation, onGpu: boolean): Promise<string[]> {
    const subcommand = args[0]?.startsWith("-") ? "train" : args[0];
    if (subcommand === "sample") return [...args, ...SAMPLE_LIMIT];
    if (subcommand === "dashboard") return [...args, "--port", "0"];
    if (subcommand !== "train") return [...args];
    const config = flagValue(args, "-f", "--file");
    if (expected.outcome === "success" && !onGpu && config !== undefined && (await this.parameters(config)) > LARGE_MODEL_PARAMETERS) {
      const small = await this.smallCopy(config);
      const swapped = args.map((a, i) => (args[i - 1] === "-f" || args[i - 1] === "--file" ? small : a.replace(new RegExp(`^--file=${escape(config)}$`), `--file=${small}`)));
      return [...swapped, ...STEP_LIMIT, ...SMALL_BATCH];
    }
    return [...args, ...STEP_LIMIT];
  }

  private async runKiln(cmd: DocCommand, args: string[]): Promise<void> {
    const expected = this.expectation(cmd, args);
    const onGpu = this.machine.gpuUsable && (flagValue(args, "--target-device") === "gpu" || cmd.env.KILN_BACKEND === "gpu");
    const ran = await this.testArgs(args, expected, onGpu);
    const options = { cacheDir: this.cacheDir, env: cmd.env, pinBackend: false };
    if (ran[0] === "dashboard") return this.runDashboard(cmd, ran, options);

    const p = this.ws.start(ran, options);
    const timer = setTimeout(() => p.child.kill("SIGKILL"), COMMAND_TIMEOUT_MS);
    const r = await p.exited.finally(() => clearTimeout(timer));
    if (expected.outcome === "success") {
      if (r.code !== 0) this.fail(cmd, "exited non-zero", r, ran);
    } else if (r.code === 0 || r.code === null || !expected.stderr.test(r.stderr)) {
      this.fail(cmd, `should have been refused (${expected.why}) with stderr matching ${expected.stderr}`, r, ran);
    }
  }

  private async runDashboard(cmd: DocCommand, ran: string[], options: { cacheDir: string; env: Record<string, string>; pinBackend: boolean }): Promise<void> {
    const p = this.ws.start(ran, options);
    try {
      await p.until(() => /http:\/\/127\.0\.0\.1:\d+\//.test(p.stdout), "the dashboard's address", 30_000);
      const url = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(p.stdout)![1];
      const page = await fetch(url);
      if (page.status !== 200 || !(await page.text()).includes("<html")) this.fail(cmd, `${url} answered ${page.status}, not the dashboard page`);
    } finally {
      if (p.child.exitCode === null) p.child.kill("SIGINT");
    }
    const r = await p.exited;
    if (r.code !== 0 && r.code !== 130) this.fail(cmd, "did not stop cleanly on Ctrl-C", r, ran);
  }
}
