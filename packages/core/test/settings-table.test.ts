import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ALL_SETTINGS, MODEL_YAML_KEYS, NOT_ON_PAGE, configSchema, kilnKeyFor, parseConfigText, resolveSettings, settingsMarkdown } from "../src/index.js";

const docs = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../docs/settings.md");
const TINY = "model: { arch: gpt2, vocab_size: 256, hidden_size: 16, num_layers: 1, num_heads: 2, max_seq_len: 16 }\ntrainer: { max_steps: 4 }\n";

describe("the settings table", () => {
  it("is what docs/settings.md shows (node tooling/write-settings-doc.mjs writes it)", () => {
    expect(fs.readFileSync(docs, "utf8")).toBe(settingsMarkdown());
  });

  it("declares every key of the config schema once, with help", () => {
    const keys = ALL_SETTINGS.map((s) => s.key);
    expect(new Set(keys).size).toBe(keys.length);
    for (const section of ["model", "trainer", "data"] as const) {
      const shape = (configSchema.shape[section] as unknown as { unwrap(): { shape: object } }).unwrap().shape;
      expect(Object.keys(shape).map((k) => `${section}.${k}`)).toEqual(keys.filter((k) => k.startsWith(`${section}.`)));
    }
    for (const s of ALL_SETTINGS) expect(s.help.length, s.key).toBeGreaterThan(5);
    expect(MODEL_YAML_KEYS.mamba2_chunk_size).toBe("mamba2ChunkSize");
  });

  it("resolves each setting to its field, defaults filled", () => {
    const s = resolveSettings(parseConfigText(TINY, "tiny.yaml"));
    for (const setting of ALL_SETTINGS.filter((x) => x.section !== "model")) expect(Object.keys(s), setting.key).toContain(setting.key === "trainer.checkpoint_dir" ? "outputDir" : setting.field);
    expect(s).toMatchObject({ lr: 3e-4, minLr: 3e-4 / 10, seqLen: 16, dtype: "f32", outputDir: "checkpoints/tiny", syncTimeout: 300, bucketMb: 25 });
  });

  it("takes the dtype's other spellings as the dtype", () => {
    expect(resolveSettings(parseConfigText(TINY.replace("max_steps: 4", "max_steps: 4, dtype: bfloat16"), "t.yaml")).dtype).toBe("bf16");
  });

  it("answers other trainers' names in YAML with kiln's key", () => {
    expect(() => parseConfigText(TINY.replace("max_steps: 4", "max_steps: 4, eval_steps: 5"), "t.yaml")).toThrow("unknown key trainer.eval_steps (line 2); kiln calls it trainer.eval_interval");
    expect(() => parseConfigText(TINY.replace("num_layers: 1", "n_layer: 1"), "t.yaml")).toThrow(/kiln calls it model\.num_layers/);
    expect(kilnKeyFor("--output_dir")).toBe("trainer.checkpoint_dir");
  });

  it("names the trainer settings the web page leaves aside", () => {
    expect(NOT_ON_PAGE).toContain("trainer.save_interval");
    expect(NOT_ON_PAGE).not.toContain("trainer.learning_rate");
  });
});
