import { existsSync } from "node:fs";
import path from "node:path";
import { globSync } from "tinyglobby";

/** A word of a text that names a file or folder of the repository, and its line (1-based). */
export interface PathMention {
  line: number;
  path: string;
}

/**
 * Extensions of the files a mention is checked for: sources, docs and configs, the files a
 * comment or a guide points a reader at. Data and outputs (.bin, .safetensors, .png, .jsonl,
 * .txt) are what a user's run writes or reads, not files of the repository.
 */
const CHECKED_EXTENSIONS = new Set(["ts", "tsx", "js", "mjs", "cjs", "c", "h", "cu", "cuh", "cc", "cpp", "hpp", "md", "py", "sh", "yaml", "yml", "json", "cmake"]);

/** Characters a path is made of; a run of them is one candidate. */
const PATH_RUN = /[A-Za-z0-9_.@*+\-/]+/g;
/** Before or after a run, these mark a template, a URL, a variable or a home folder: not a repository path. */
const NOT_A_PATH_NEIGHBOUR = new Set(["$", "~", "<", ">", "{", "}", ":", "%", "\\", "="]);

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) starts.push(i + 1);
  return starts;
}

function lineOf(starts: number[], offset: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid] <= offset) lo = mid;
    else hi = mid - 1;
  }
  return lo + 1;
}

/** Whether a candidate word is a path worth checking, and the form to check. */
function asCheckedPath(word: string): string | undefined {
  const p = word.replace(/[.,]+$/, "");
  if (p.includes("//") || p.includes("...") || p.startsWith("@") || p.startsWith("/") || p.startsWith("-")) return undefined;
  const segments = p.split("/").filter((s) => s !== "" && s !== "." && s !== "..");
  // A bare file name ("llm.c", "record_writer.cc") is as often another project's file as ours: only paths are checked.
  if (!p.includes("/")) return undefined;
  // A folder: checked when it has two names or more (one name, "src/", is too often relative to something unsaid).
  if (p.endsWith("/")) return segments.length >= 2 ? p : undefined;
  // A token file's sidecar ("data/my.bin.json") is data, like the token file.
  if (p.endsWith(".bin.json")) return undefined;
  const ext = /\.([A-Za-z0-9]+)$/.exec(segments.at(-1) ?? "")?.[1];
  return ext !== undefined && CHECKED_EXTENSIONS.has(ext) ? p : undefined;
}

/** The path-like words of a text (prose, a comment, a code block) that name repository files or folders. */
export function pathMentions(text: string, firstLine = 1): PathMention[] {
  const starts = lineStarts(text);
  const out: PathMention[] = [];
  for (const m of text.matchAll(PATH_RUN)) {
    const before = text[m.index - 1];
    const after = text[m.index + m[0].length];
    if ((before !== undefined && NOT_A_PATH_NEIGHBOUR.has(before)) || (after !== undefined && NOT_A_PATH_NEIGHBOUR.has(after))) continue;
    const p = asCheckedPath(m[0]);
    if (p !== undefined) out.push({ line: firstLine - 1 + lineOf(starts, m.index), path: p });
  }
  return out;
}

/**
 * Where a mention in `file` may point: `./x` and `../x` from the file's folder only; any other
 * path from the file's folder or any folder above it up to the repository root (comments name
 * files from their package's src/ folder, package READMEs from the package, guides from the top).
 */
export function candidateLocations(mention: string, file: string, repoRoot: string): string[] {
  const dir = path.dirname(file);
  if (mention.startsWith("./") || mention.startsWith("../")) return [path.resolve(dir, mention)];
  const bases: string[] = [];
  for (let d = dir; ; d = path.dirname(d)) {
    bases.push(d);
    if (d === repoRoot || !d.startsWith(repoRoot)) break;
  }
  return bases.map((base) => path.resolve(base, mention));
}

/** Whether a location exists: a glob matches something; `x.js` may be the `x.ts` it is built from. */
export function locationExists(location: string): boolean {
  if (location.includes("*")) {
    const dir = path.dirname(location);
    return existsSync(dir) && globSync(path.basename(location), { cwd: dir, onlyFiles: false }).length > 0;
  }
  if (existsSync(location)) return true;
  return location.endsWith(".js") && existsSync(location.replace(/\.js$/, ".ts"));
}
