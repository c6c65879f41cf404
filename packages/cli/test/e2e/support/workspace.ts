import { createHash } from "node:crypto";
import { cp, mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { stringify } from "yaml";
import { type KilnOptions, type KilnProcess, type KilnResult, runKiln, startKiln } from "./kiln-process.js";

type Section = Record<string, unknown>;
export interface ConfigSections {
  model?: Section;
  trainer?: Section;
  data?: Section;
}

/** A GPT-2 small enough for the reference backend: 7.7K parameters, a step in milliseconds. */
export const TINY_MODEL: Section = { arch: "gpt2", vocab_size: 256, hidden_size: 16, num_layers: 1, num_heads: 2, max_seq_len: 16 };
export const TINY_TRAINER: Section = {
  batch_size: 2,
  seq_len: 16,
  max_steps: 4,
  learning_rate: 0.003,
  log_interval: 1,
  eval_interval: 1000,
  eval_iters: 1,
  save_interval: 1000,
  seed: 7,
};

/** YAML for the tiny model, with the given keys set over it section by section. */
export function configText(over: ConfigSections = {}): string {
  const doc: Record<string, Section> = { model: { ...TINY_MODEL, ...over.model }, trainer: { ...TINY_TRAINER, ...over.trainer } };
  if (over.data) doc.data = over.data;
  return stringify(doc);
}

/** Byte-level token ids of some English text, repeated to `count` tokens. */
export function textTokens(count: number): Uint32Array {
  const text = Buffer.from(
    "Once upon a time, a small fox lived by a river. Every morning the fox ran to the water and looked at the fish. " +
      "One day a bird said: why do you look at the fish? The fox smiled and said: because they shine like the sun.\n",
  );
  const ids = new Uint32Array(count);
  for (let i = 0; i < count; i++) ids[i] = text[i % text.length];
  return ids;
}

export interface TreeEntry {
  kind: "dir" | "file";
  size: number;
  sha256: string;
  mtimeMs: number;
}

/** Every file and folder under `root` with its size, content hash and modification time. */
export async function snapshotTree(root: string): Promise<Map<string, TreeEntry>> {
  const out = new Map<string, TreeEntry>();
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      const rel = path.relative(root, full);
      const st = await stat(full);
      if (entry.isDirectory()) {
        out.set(rel, { kind: "dir", size: 0, sha256: "", mtimeMs: st.mtimeMs });
        await walk(full);
      } else {
        out.set(rel, { kind: "file", size: st.size, sha256: createHash("sha256").update(await readFile(full)).digest("hex"), mtimeMs: st.mtimeMs });
      }
    }
  };
  await walk(root);
  return out;
}

/** A temp folder a test runs the CLI in, with its own cache folder beside it. */
export class Workspace {
  private constructor(
    /** Where the CLI runs; every relative path below is inside it. */
    readonly dir: string,
    readonly cacheDir: string,
    private readonly top: string,
  ) {}

  static async create(label: string): Promise<Workspace> {
    const top = await mkdtemp(path.join(tmpdir(), `kiln-e2e-${label}-`));
    const ws = new Workspace(path.join(top, "work"), path.join(top, "cache"), top);
    await mkdir(ws.dir);
    await mkdir(ws.cacheDir);
    return ws;
  }

  /** A new workspace holding a copy of `from`'s files (its cache is not copied). */
  static async copyOf(label: string, from: Workspace): Promise<Workspace> {
    const ws = await Workspace.create(label);
    await cp(from.dir, ws.dir, { recursive: true });
    return ws;
  }

  path(...parts: string[]): string {
    return path.join(this.dir, ...parts);
  }

  async write(name: string, content: string | Uint8Array): Promise<string> {
    const file = this.path(name);
    await writeFile(file, content);
    return file;
  }

  writeConfig(name: string, over: ConfigSections = {}): Promise<string> {
    return this.write(name, configText(over));
  }

  writeTokens(name: string, ids: Uint32Array): Promise<string> {
    return this.write(name, new Uint8Array(ids.buffer, ids.byteOffset, ids.byteLength));
  }

  private options(extra: Partial<KilnOptions>): KilnOptions {
    return { cwd: this.dir, cacheDir: this.cacheDir, ...extra };
  }

  run(args: readonly string[], extra: Partial<KilnOptions> = {}): Promise<KilnResult> {
    return runKiln(args, this.options(extra));
  }

  start(args: readonly string[], extra: Partial<KilnOptions> = {}): KilnProcess {
    return startKiln(args, this.options(extra));
  }

  snapshot(): Promise<Map<string, TreeEntry>> {
    return snapshotTree(this.dir);
  }

  async remove(): Promise<void> {
    await rm(this.top, { recursive: true, force: true });
  }
}
