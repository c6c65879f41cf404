import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import type { DocCommand } from "./markdown-commands.js";
import { REPO_ROOT } from "./paths.js";

/**
 * What the documentation tests do with each kind of command a README or guide shows.
 *
 * - `kiln ...` and `pnpm kiln ...` (the root package.json's script for the same built CLI):
 *   run, in document order, in a workspace of the document's own (see doc-kiln-runs.ts).
 * - Developer commands that build, test or benchmark kiln itself (`pnpm --filter <pkg>
 *   <script>`, `pnpm turbo run <task>`, `pnpm <root script>`, `pnpm --dir <dir> install`,
 *   `bash <script>`, `node <script>`, `python3 <script>`): running them would rebuild or
 *   retest the whole workspace inside one test, so what they name is checked instead: the
 *   package and its script, the turbo task, the script file and that it parses.
 * - `cp` and `mkdir`, run in the workspace as written.
 * - `tensorboard --logdir DIR`: TensorBoard is not part of kiln; DIR must hold the event
 *   file the commands before it wrote.
 * - `ollama create NAME -f FILE` and `ollama run NAME ...`: Ollama is not part of kiln; FILE
 *   gets the document's `Modelfile` block, whose FROM must name a GGUF file the commands
 *   before it wrote (kiln's reader reads it); `run` must name a model created before it.
 * Any other command has no rule and fails the test, so that a new kind gets a decision.
 */
export type CommandRule =
  /** `words` leading words name the CLI (`kiln`, or `pnpm kiln`). */
  | { kind: "kiln"; words: 1 | 2 }
  | { kind: "developer"; check: () => void }
  | { kind: "file-command" }
  | { kind: "tensorboard"; logdir: string }
  | { kind: "ollama"; action: "create" | "run"; model: string; modelfile?: string };

interface PackageJson {
  name?: string;
  scripts?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

function readJson<T>(file: string): T {
  return JSON.parse(readFileSync(file, "utf8")) as T;
}

const ROOT_PACKAGE = (): PackageJson => readJson<PackageJson>(path.join(REPO_ROOT, "package.json"));

/** The workspace's packages by name: packages/*, tooling and tooling/*. */
function workspacePackages(): Map<string, { dir: string; json: PackageJson }> {
  const out = new Map<string, { dir: string; json: PackageJson }>();
  for (const parent of ["packages", "tooling"]) {
    for (const entry of readdirSync(path.join(REPO_ROOT, parent), { withFileTypes: true })) {
      const dir = path.join(REPO_ROOT, parent, entry.name);
      const file = entry.isDirectory() ? path.join(dir, "package.json") : "";
      if (file && existsSync(file)) {
        const json = readJson<PackageJson>(file);
        if (json.name) out.set(json.name, { dir, json });
      }
    }
  }
  const tooling = path.join(REPO_ROOT, "tooling", "package.json");
  const toolingJson = readJson<PackageJson>(tooling);
  if (toolingJson.name) out.set(toolingJson.name, { dir: path.dirname(tooling), json: toolingJson });
  return out;
}

/** pnpm's own commands, which need no script of that name. */
const PNPM_BUILTINS = new Set(["add", "install", "i", "remove", "update", "exec", "list", "why", "outdated"]);

function fail(cmd: DocCommand, why: string): never {
  throw new Error(`${cmd.file}:${cmd.line}: ${why}\n  command: ${cmd.written}`);
}

function words(cmd: DocCommand): string[] {
  return cmd.words.map((w) => (typeof w === "string" ? w : w.glob));
}

function checkScriptFile(cmd: DocCommand, file: string | undefined, syntaxCheck?: (abs: string) => void): void {
  if (!file) fail(cmd, "names no script file");
  const abs = path.join(REPO_ROOT, file);
  if (!existsSync(abs)) fail(cmd, `${file} does not exist in the repository`);
  syntaxCheck?.(abs);
}

function syntaxChecked(cmd: DocCommand, program: string, args: string[]): void {
  try {
    execFileSync(program, args, { cwd: REPO_ROOT, stdio: "pipe" });
  } catch (err) {
    fail(cmd, `${program} ${args.join(" ")} failed: ${(err as { stderr?: Buffer }).stderr?.toString() ?? String(err)}`);
  }
}

/** The check of a `pnpm` command other than `pnpm kiln`. */
function pnpmCheck(cmd: DocCommand, args: string[]): () => void {
  return () => {
    const root = ROOT_PACKAGE();
    if (args[0] === "--filter" || args[0] === "-F") {
      const selector = args[1].replace(/^\.\.\./, "").replace(/\.\.\.$/, "");
      const pkg = workspacePackages().get(selector);
      if (!pkg) fail(cmd, `--filter ${args[1]} selects no workspace package`);
      const script = args[2] === "run" ? args[3] : args[2];
      if (!PNPM_BUILTINS.has(script) && !pkg.json.scripts?.[script]) fail(cmd, `${selector} has no "${script}" script`);
      return;
    }
    if (args[0] === "--dir" || args[0] === "-C") {
      if (!existsSync(path.join(REPO_ROOT, args[1], "package.json"))) fail(cmd, `${args[1]} holds no package.json`);
      if (!PNPM_BUILTINS.has(args[2])) fail(cmd, `pnpm --dir ${args[1]} ${args[2]}: not a pnpm command the tests know`);
      return;
    }
    if (args[0] === "turbo") {
      const turbo = readJson<{ tasks: Record<string, unknown> }>(path.join(REPO_ROOT, "turbo.json"));
      if (!root.devDependencies?.turbo) fail(cmd, "turbo is not a dev dependency of the workspace root");
      if (args[1] !== "run" || !turbo.tasks[args[2]]) fail(cmd, `turbo.json has no task "${args[2]}"`);
      return;
    }
    if (!root.scripts?.[args[0]]) fail(cmd, `the root package.json has no "${args[0]}" script`);
  };
}

/** Which rule a documented command falls under; throws for a command no rule covers. */
export function ruleFor(cmd: DocCommand): CommandRule {
  const w = words(cmd);
  if (w[0] === "kiln") return { kind: "kiln", words: 1 };
  if (w[0] === "pnpm" && w[1] === "kiln") return { kind: "kiln", words: 2 };
  if (w[0] === "pnpm" && w.length > 1) return { kind: "developer", check: pnpmCheck(cmd, w.slice(1)) };
  if (w[0] === "bash") return { kind: "developer", check: () => checkScriptFile(cmd, w[1], (abs) => syntaxChecked(cmd, "bash", ["-n", abs])) };
  if (w[0] === "node") return { kind: "developer", check: () => checkScriptFile(cmd, w[1], (abs) => syntaxChecked(cmd, process.execPath, ["--check", abs])) };
  // The system interpreter, or the one of a virtual environment a tooling script makes (.venv-hf).
  if (w[0] === "python3" || w[0] === "/usr/bin/python3" || /^\.venv[\w-]*\/bin\/python3?$/.test(w[0])) return { kind: "developer", check: () => checkScriptFile(cmd, w[1]) };
  if (w[0] === "cp" || w[0] === "mkdir") return { kind: "file-command" };
  if (w[0] === "tensorboard" && w[1] === "--logdir" && w[2]) return { kind: "tensorboard", logdir: w[2] };
  if (w[0] === "ollama" && w[1] === "create" && w[2] && w[3] === "-f" && w[4]) return { kind: "ollama", action: "create", model: w[2], modelfile: w[4] };
  if (w[0] === "ollama" && w[1] === "run" && w[2]) return { kind: "ollama", action: "run", model: w[2] };
  return fail(cmd, "no rule says how to check this command (see doc-command-rules.ts)");
}
