import type { KilnResult } from "./kiln-process.js";
import { type Workspace, textTokens } from "./workspace.js";

/** Throws with the process's stderr unless it exited 0. */
export function expectSuccess(r: KilnResult, what: string): KilnResult {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code ?? r.signal}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
  return r;
}

/**
 * Trains the tiny model for 4 steps, headless, in `ws` (config `tiny.yaml` and tokens
 * `data.bin`, both written here) into `out`: step_2 and step_4 checkpoints, final weights, metrics.
 */
export async function trainTiny(ws: Workspace, out: string): Promise<KilnResult> {
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 4, save_interval: 2 } });
  await ws.writeTokens("data.bin", textTokens(2000));
  return expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", out, "--headless"]), "training the tiny model");
}
