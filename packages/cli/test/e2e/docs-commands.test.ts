import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type Token, marked } from "marked";
import { globSync } from "tinyglobby";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ruleFor } from "./support/doc-command-rules.js";
import { DocumentRun, type Machine, documentWorkspace, machineFromDoctor } from "./support/doc-kiln-runs.js";
import { runKiln } from "./support/kiln-process.js";
import { type DocCommand, documentCommands, inlineCodeSpans, untaggedCommandBlocks } from "./support/markdown-commands.js";
import { REPO_ROOT } from "./support/paths.js";

// Every shell command of every README and guide runs here, so that none can drift from
// what kiln does: each document's commands in order, in a fresh folder holding the
// repository's models/ and a corpus/ of text. What "runs" means for each kind of command
// (training for two steps, GPU commands as far as the GPU, developer commands by what they
// name) is written down in support/doc-command-rules.ts and support/doc-kiln-runs.ts.

/** The guides (docs/*.md) and every README of the repository, relative to its root. */
const DOCUMENTS = globSync(["docs/*.md", "**/README.md"], { cwd: REPO_ROOT, ignore: ["**/node_modules/**", "**/dist/**", "**/build/**"] }).sort();
const COMMANDS = new Map<string, DocCommand[]>(DOCUMENTS.map((d) => [d, documentCommands(d, readFileSync(path.join(REPO_ROOT, d), "utf8"))]));

let cacheDir: string;
let machine: Machine;
const parameterCounts = new Map<string, number>();

beforeAll(async () => {
  // One cache for every document: the built-in corpus and the CPU peak are made once.
  cacheDir = await mkdtemp(path.join(tmpdir(), "kiln-e2e-docs-cache-"));
  const doctor = await runKiln(["doctor", "--json"], { cwd: cacheDir, cacheDir });
  expect(doctor.code, doctor.stderr).toBe(0);
  machine = machineFromDoctor(doctor.stdout);
});
afterAll(() => rm(cacheDir, { recursive: true, force: true }));

/** The long flags `kiln <subcommand> --help` lists. */
async function helpFlags(subcommand: string): Promise<Set<string>> {
  const r = await runKiln([subcommand, "--help"], { cwd: cacheDir, cacheDir });
  expect(r.code, r.stderr).toBe(0);
  return new Set([...r.stdout.matchAll(/(?:^|[\s,])(--[a-z0-9-]+)/gm)].map((m) => m[1]));
}

describe("the commands of the READMEs and guides", () => {
  it("links every guide from the root README", () => {
    const guides = DOCUMENTS.filter((d) => d.startsWith("docs/"));
    expect(guides).toEqual(expect.arrayContaining(["docs/cpu-training.md", "docs/gpu-training.md", "docs/multi-gpu.md", "docs/precision-and-tuning.md", "docs/fine-tuning.md", "docs/troubleshooting.md"]));
    const links = new Set<string>();
    marked.walkTokens(marked.lexer(readFileSync(path.join(REPO_ROOT, "README.md"), "utf8")), (t: Token) => {
      if (t.type === "link") links.add((t as { href: string }).href);
    });
    expect(guides.filter((g) => !links.has(g))).toEqual([]);
  });

  it("runs `pnpm kiln` as the built CLI", () => {
    const root = JSON.parse(readFileSync(path.join(REPO_ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
    expect(root.scripts.kiln).toBe("node packages/cli/dist/bin/kiln.js");
  });

  it("reads a shell block as a shell splits it", () => {
    const md = [
      "Text `kiln doctor`.",
      "",
      "```sh",
      "# a comment line",
      'bash tooling/bootstrap.sh && pnpm kiln sample --prompt "Once upon" # say hi',
      "KILN_BACKEND=cuda-sim kiln prepare -i corpus/*.txt \\",
      "  -o data/x.bin",
      "```",
      "",
      "```text",
      "kiln train output, not a command",
      "```",
    ].join("\n");
    expect(documentCommands("x.md", md).map(({ line, env, words, comment }) => ({ line, env, words, comment }))).toEqual([
      { line: 5, env: {}, words: ["bash", "tooling/bootstrap.sh"], comment: undefined },
      { line: 5, env: {}, words: ["pnpm", "kiln", "sample", "--prompt", "Once upon"], comment: "say hi" },
      { line: 6, env: { KILN_BACKEND: "cuda-sim" }, words: ["kiln", "prepare", "-i", { glob: "corpus/*.txt" }, "-o", "data/x.bin"], comment: undefined },
    ]);
    expect(() => documentCommands("x.md", "```sh\nkiln doctor | head\n```")).toThrow(/x\.md:2: shell syntax/);
    expect(untaggedCommandBlocks("```\npnpm kiln doctor\n```\n\n    kiln train -f x.yaml\n\n```text\nkiln train x\n```")).toEqual(["pnpm kiln doctor", "kiln train -f x.yaml"]);
  });

  it("leaves no command in a code block that is not tagged sh, bash or shell", () => {
    const untagged = DOCUMENTS.flatMap((d) => untaggedCommandBlocks(readFileSync(path.join(REPO_ROOT, d), "utf8")).map((first) => `${d}: ${first}`));
    expect(untagged).toEqual([]);
  });

  it("has a rule for every documented command", () => {
    const all = [...COMMANDS.values()].flat();
    expect(all.length).toBeGreaterThan(40);
    const unruled: string[] = [];
    for (const cmd of all) {
      try {
        ruleFor(cmd);
      } catch (err) {
        unruled.push((err as Error).message);
      }
    }
    expect(unruled).toEqual([]);
  });

  it("names only subcommands and flags kiln has in inline `kiln ...` mentions", async () => {
    const subcommands = ["train", "prepare", "sample", "eval", "export", "push", "doctor", "estimate", "plot", "dashboard", "web"];
    const flags = new Map(await Promise.all(subcommands.map(async (s) => [s, await helpFlags(s)] as const)));
    const wrong: string[] = [];
    let checked = 0;
    for (const doc of DOCUMENTS) {
      for (const span of inlineCodeSpans(readFileSync(path.join(REPO_ROOT, doc), "utf8"))) {
        const words = span.replace(/^pnpm /, "").split(/\s+/);
        // `kiln <command> --help` and the like name a placeholder, not a subcommand.
        if (words[0] !== "kiln" || words.length < 2 || /^[<A-Z]/.test(words[1])) continue;
        checked++;
        const sub = words[1].startsWith("-") ? "train" : words[1];
        const known = flags.get(sub);
        if (!known) {
          wrong.push(`${doc}: \`${span}\`: kiln has no subcommand ${sub}`);
          continue;
        }
        for (const w of words.slice(1)) {
          const flag = w.replace(/=.*$/, "");
          if (flag.startsWith("--") && !known.has(flag)) wrong.push(`${doc}: \`${span}\`: kiln ${sub} has no flag ${flag}`);
        }
      }
    }
    expect(checked).toBeGreaterThan(10);
    expect(wrong).toEqual([]);
  });

  for (const [doc, commands] of COMMANDS) {
    if (commands.length === 0) continue;
    it(`${doc}: every command runs`, { timeout: 300_000 }, async () => {
      const ws = await documentWorkspace(`docs-${doc.replace(/[^A-Za-z0-9]+/g, "-")}`);
      try {
        const run = new DocumentRun(ws, cacheDir, machine, parameterCounts);
        for (const cmd of commands) await run.run(cmd);
      } finally {
        await ws.remove();
      }
    });
  }
});
