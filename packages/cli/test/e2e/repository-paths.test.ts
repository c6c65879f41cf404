import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { type Token, marked } from "marked";
import { describe, expect, it } from "vitest";
import { candidateLocations, locationExists, pathMentions } from "./support/path-mentions.js";
import { REPO_ROOT } from "./support/paths.js";
import { commentsOf, hasKnownComments } from "./support/source-comments.js";

// Every relative link of every markdown file, and every repository path named in markdown text
// or in a code comment, must point at something that exists, so that a reader following one
// never lands nowhere. Outputs that git ignores (build/, dist/, checkpoints/) are not checked:
// they exist once something has been built or run.

/** The repository's files: tracked, and new ones that git does not ignore (absolute paths). */
function repositoryFiles(): string[] {
  const out = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], { cwd: REPO_ROOT, encoding: "utf8", maxBuffer: 64 << 20 });
  return [...new Set(out.split("\0").filter((f) => f !== ""))].map((f) => path.join(REPO_ROOT, f)).filter((f) => existsSync(f));
}

/** Of the given absolute paths, those git would ignore (generated outputs). */
function ignoredByGit(locations: readonly string[]): Set<string> {
  if (locations.length === 0) return new Set();
  const input = locations.map((l) => path.relative(REPO_ROOT, l)).join("\n");
  try {
    const out = execFileSync("git", ["check-ignore", "--no-index", "--stdin"], { cwd: REPO_ROOT, input, encoding: "utf8" });
    return new Set(out.split("\n").filter((l) => l !== "").map((l) => path.join(REPO_ROOT, l)));
  } catch (err) {
    // Exit 1: none of them is ignored.
    if ((err as { status?: number }).status === 1) return new Set();
    throw err;
  }
}

/** Relative link targets of a markdown text, with their lines. */
function markdownLinks(text: string): { line: number; target: string }[] {
  const out: { line: number; target: string }[] = [];
  let searchFrom = 0;
  marked.walkTokens(marked.lexer(text), (token: Token) => {
    if (token.type !== "link" && token.type !== "image") return;
    const href = (token as { href: string }).href;
    const at = text.indexOf(token.raw, searchFrom);
    if (at !== -1) searchFrom = at;
    if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith("#") || href.startsWith("/")) return;
    const line = text.slice(0, Math.max(at, 0)).split("\n").length;
    out.push({ line, target: decodeURIComponent(href.replace(/#.*$/, "")) });
  });
  return out;
}

interface Finding {
  where: string;
  mention: string;
  locations: string[];
}

describe("paths named in the repository", () => {
  const files = repositoryFiles();

  it("finds markdown files and commented sources to check", () => {
    expect(files.filter((f) => f.endsWith(".md")).length).toBeGreaterThan(5);
    expect(files.filter(hasKnownComments).length).toBeGreaterThan(100);
  });

  it("tells repository paths from URLs, placeholders, outputs and prose", () => {
    const text = [
      "See `models/nano.yaml`, tooling/bench/cpu-peak.mjs and packages/kernels-cuda/csrc/runtime/.",
      "Not paths: https://example.com/a/b.md, $XDG_CACHE_HOME/kiln/cpu-peak.json, <output>/metrics.json,",
      "data/my.bin, checkpoints/nano-start/final.safetensors, f32/bf16/f16, src/, @kiln/contract/conformance.",
      "Missing: src/nothing-here.ts",
    ].join("\n");
    const found = pathMentions(text, 10);
    expect(found).toEqual([
      { line: 10, path: "models/nano.yaml" },
      { line: 10, path: "tooling/bench/cpu-peak.mjs" },
      { line: 10, path: "packages/kernels-cuda/csrc/runtime/" },
      { line: 13, path: "src/nothing-here.ts" },
    ]);
    const from = path.join(REPO_ROOT, "packages", "cli", "src", "commands", "train.ts");
    expect(candidateLocations("config/setting-flags.ts", from, REPO_ROOT).some(locationExists)).toBe(true);
    expect(candidateLocations("src/nothing-here.ts", from, REPO_ROOT).some(locationExists)).toBe(false);
    expect(candidateLocations("./config/setting-flags.ts", from, REPO_ROOT).some(locationExists)).toBe(false);
    expect(commentsOf("x.ts", 'const url = "http://a/b.md"; // see models/nano.yaml\nconst re = /\\/\\/ not a comment/;').map((c) => c.text)).toEqual(["// see models/nano.yaml"]);
  });

  it("every relative markdown link points at a file or folder that exists", () => {
    const broken: string[] = [];
    for (const file of files.filter((f) => f.endsWith(".md"))) {
      for (const { line, target } of markdownLinks(readFileSync(file, "utf8"))) {
        if (!existsSync(path.resolve(path.dirname(file), target))) broken.push(`${path.relative(REPO_ROOT, file)}:${line}: ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("every path named in markdown or in a code comment exists", () => {
    const unresolved: Finding[] = [];
    for (const file of files) {
      const rel = path.relative(REPO_ROOT, file);
      const text = readFileSync(file, "utf8");
      const mentions = file.endsWith(".md") ? pathMentions(text) : commentsOf(file, text).flatMap((c) => pathMentions(c.text, c.line));
      for (const m of mentions) {
        const where = `${rel}:${m.line}`;
        const locations = candidateLocations(m.path, file, REPO_ROOT);
        if (!locations.some(locationExists)) unresolved.push({ where, mention: m.path, locations });
      }
    }
    const ignored = ignoredByGit(unresolved.flatMap((f) => f.locations));
    const missing = unresolved.filter((f) => !f.locations.some((l) => ignored.has(l))).map((f) => `${f.where}: ${f.mention}`);
    expect(missing).toEqual([]);
  });
});
