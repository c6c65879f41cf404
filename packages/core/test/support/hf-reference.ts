import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

/** tooling/fixtures/hf_reference.py: transformers' GPT-2 and Llama forward, in plain PyTorch. */
export const HF_REFERENCE = path.resolve(here, "../../../../tooling/fixtures/hf_reference.py");

/** The system interpreter, which Debian's python3-torch installs into (tooling/fixtures/README.md). */
const PYTHON = "/usr/bin/python3";

/** Why the PyTorch reference cannot run here, or undefined when it can. */
export function torchMissing(): string | undefined {
  const r = spawnSync(PYTHON, ["-c", "import torch"], { encoding: "utf8" });
  if (r.error) return `${PYTHON} is not installed`;
  return r.status === 0 ? undefined : "python3-torch is not installed (apt-get install python3-torch)";
}

/** Runs hf_reference.py with `args`; returns its stdout (throws with its stderr if it fails). */
export function runHfReference(...args: string[]): string {
  const r = spawnSync(PYTHON, [HF_REFERENCE, ...args], { encoding: "utf8", maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`hf_reference.py ${args[0]} failed (${r.status ?? r.error?.message}):\n${r.stderr}`);
  return r.stdout;
}

/** transformers' logits for `ids` (rows of token ids) from the model folder `dir`, flattened. */
export function referenceLogits(dir: string, ids: number[][]): Float64Array {
  const out = JSON.parse(runHfReference("logits", dir, JSON.stringify(ids))) as { shape: number[]; logits: number[] };
  return Float64Array.from(out.logits);
}
