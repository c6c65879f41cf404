import { readFile, readdir } from "node:fs/promises";
import path from "node:path";
import { openSafetensors } from "@kiln/core";

export interface CheckpointContents {
  metadata: Record<string, string>;
  /** Every tensor's raw bytes, by name. */
  tensors: Map<string, Uint8Array>;
}

/** Opens a checkpoint with kiln's safetensors reader and reads every tensor (throws if any part is damaged). */
export async function readCheckpoint(file: string): Promise<CheckpointContents> {
  const reader = await openSafetensors(file);
  try {
    const tensors = new Map<string, Uint8Array>();
    for (const name of reader.names) tensors.set(name, (await reader.read(name)).data);
    return { metadata: reader.metadata, tensors };
  } finally {
    await reader.close();
  }
}

/** Names of tensors whose bytes differ between two checkpoints (or that only one has). */
export function differingTensors(a: CheckpointContents, b: CheckpointContents): string[] {
  const names = new Set([...a.tensors.keys(), ...b.tensors.keys()]);
  return [...names].filter((n) => {
    const x = a.tensors.get(n);
    const y = b.tensors.get(n);
    return x === undefined || y === undefined || !Buffer.from(x.buffer, x.byteOffset, x.byteLength).equals(Buffer.from(y.buffer, y.byteOffset, y.byteLength));
  });
}

const STEP_FILE = /^step_(\d+)\.safetensors$/;

/** The step_<N>.safetensors files in `dir`, oldest first. */
export async function stepCheckpoints(dir: string): Promise<{ step: number; file: string }[]> {
  return (await readdir(dir))
    .map((n) => STEP_FILE.exec(n))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ step: Number(m[1]), file: path.join(dir, m[0]) }))
    .sort((a, b) => a.step - b.step);
}

/** The lines of <dir>/metrics.jsonl, parsed. */
export async function metricsLog(dir: string): Promise<Record<string, unknown>[]> {
  const text = await readFile(path.join(dir, "metrics.jsonl"), "utf8");
  return text
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** The largest |a[i] - b[i]| of two tensors' f32 bytes. */
export function maxAbsDiff(a: Uint8Array, b: Uint8Array): number {
  const x = new Float32Array(a.slice().buffer);
  const y = new Float32Array(b.slice().buffer);
  let worst = 0;
  for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i] - y[i]));
  return worst;
}
