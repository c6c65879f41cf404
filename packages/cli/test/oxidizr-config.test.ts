import { describe, expect, it } from "vitest";
import { ConfigError } from "@kiln/contract";
import { ignoredKeysWarning, paramLayout, parseConfigText, resolveSettings } from "@kiln/core";

// Oxidizr's MoE example, with the keys kiln reads and the ones it leaves aside.
const OXIDIZR_MOE = `
model:
  name: nano-moe
  hidden_size: 64
  num_layers: 2
  num_heads: 4
  kv_heads: null
  num_experts: 4
  experts_per_tok: 2
  shared_expert_enabled: true
  intermediate_size: 96
  vocab_size: 256
  max_seq_len: 32
  rope_theta: 10000.0
trainer:
  learning_rate: 0.0003
  max_steps: 0
  num_epochs: 2
  batch_size: 4
  load_balance_alpha: 0.02
  group_size: 4
  beta_kl: 0.04
`;

const load = (text: string) => parseConfigText(text, "oxidizr.yaml");

describe("a config written for Oxidizr", () => {
  it("trains a mixture-of-experts Llama, naming the settings kiln ignores in one warning", () => {
    const loaded = load(OXIDIZR_MOE);
    const s = resolveSettings(loaded);
    expect(s.model).toMatchObject({ arch: "llama", kvHeads: 4, numExperts: 4, expertsPerToken: 2, sharedExpert: true, intermediateSize: 96 });
    expect(s.loadBalanceAlpha).toBe(0.02);
    expect(s.maxSteps).toBeUndefined();
    expect(s.numEpochs).toBe(2);
    expect(ignoredKeysWarning(s.ignoredKeys)).toBe("warning: kiln ignores model.name, trainer.group_size, trainer.beta_kl (a label, GRPO settings it does not implement)");
  });

  it("sizes heads by head_dim and adds Llama's attention and MLP biases from the model keys", () => {
    const dense = OXIDIZR_MOE.replace("  num_experts: 4\n  experts_per_tok: 2\n  shared_expert_enabled: true\n", "  head_dim: 12\n  attention_bias: true\n  mlp_bias: true\n");
    const s = resolveSettings(load(dense));
    expect(s.model).toMatchObject({ headDim: 12, attentionBias: true, mlpBias: true });
    const shapes = new Map(paramLayout(s.model).specs.map((p) => [p.name, p.shape]));
    expect(shapes.get("model.layers.0.self_attn.q_proj.weight")).toEqual([48, 64]);
    expect(shapes.get("model.layers.0.self_attn.o_proj.bias")).toEqual([64]);
    expect(shapes.get("model.layers.1.mlp.down_proj.bias")).toEqual([64]);
    expect(() => resolveSettings(load(dense.replace("head_dim: 12", "head_dim: 7")))).toThrow(/head_dim 7 is odd/);
    expect(() => resolveSettings(load(OXIDIZR_MOE.replace("  num_experts: 4\n", "  num_experts: 4\n  mlp_bias: true\n")))).toThrow(/mlp_bias adds biases to the dense MLP/);
  });

  it("trains Mamba2 layers from Oxidizr's keys, and names the key at fault when their sizes do not fit", () => {
    const keys = "  mamba_layers: [0]\n  mamba2_num_heads: 2\n  mamba2_head_dim: 64\n  mamba2_state_size: 32\n  mamba2_chunk_size: 16\n  mamba2_n_groups: 1\n  mamba2_conv_kernel: 4\n  mamba2_expand: 2\n";
    const text = OXIDIZR_MOE.replace("  num_experts: 4\n", `  num_experts: 4\n${keys}`);
    expect(resolveSettings(load(text)).model).toMatchObject({ mambaLayers: [0], mamba2NumHeads: 2, mamba2HeadDim: 64, mamba2StateSize: 32, mamba2ChunkSize: 16, mamba2NGroups: 1, mamba2ConvKernel: 4, mamba2Expand: 2 });
    const refusal = (t: string) => {
      try {
        resolveSettings(load(t));
      } catch (e) {
        return e as ConfigError;
      }
    };
    const heads = refusal(text.replace("mamba2_num_heads: 2", "mamba2_num_heads: 3"));
    expect(heads?.message).toMatch(/hidden_size 64 x mamba2_expand 2 = 128 is not mamba2_num_heads 3 x mamba2_head_dim 64/);
    expect(heads?.where).toMatch(/model\.mamba2_num_heads/);
    expect(refusal(text.replace("mamba_layers: [0]", "mamba_layers: [0, 2]"))?.message).toMatch(/mamba_layers names layer 2, but the model has layers 0\.\.1/);
    expect(refusal(text.replace("mamba2_state_size: 32", "mamba2_state_size: 300"))?.where).toMatch(/model\.mamba2_state_size/);
    expect(refusal(text.replace("mamba2_n_groups: 1", "mamba2_n_groups: 3"))?.message).toMatch(/mamba2_n_groups 3 does not divide the 2 Mamba2 heads/);
  });

  it("trains multi-head latent attention from its keys, and refuses them half given or on GPT-2", () => {
    const mla = OXIDIZR_MOE.replace("  num_experts: 4\n", "  num_experts: 4\n  kv_latent_dim: 32\n  q_latent_dim: 48\n  d_rope: 8\n");
    expect(resolveSettings(load(mla)).model).toMatchObject({ kvLatentDim: 32, qLatentDim: 48, ropeDim: 8, numExperts: 4 });
    expect(() => resolveSettings(load(mla.replace("  d_rope: 8\n", "")))).toThrow(/d_rope \(not set\) is not an even number >= 2/);
    expect(() => resolveSettings(load(mla.replace("  kv_latent_dim: 32\n", "")))).toThrow(/q_latent_dim configures multi-head latent attention, which needs kv_latent_dim too/);
    const gpt2 = "model:\n  arch: gpt2\n  hidden_size: 32\n  num_layers: 1\n  num_heads: 4\n  vocab_size: 64\n  max_seq_len: 16\n  kv_latent_dim: 8\n";
    const refusal = (() => {
      try {
        resolveSettings(load(gpt2));
      } catch (e) {
        return e as ConfigError;
      }
    })();
    expect(refusal?.message).toMatch(/gpt2 architecture has no multi-head latent attention/);
    expect(refusal?.where).toMatch(/model\.kv_latent_dim/);
  });

  it("refuses more experts per token than experts", () => {
    const loaded = load(OXIDIZR_MOE.replace("experts_per_tok: 2", "experts_per_tok: 5"));
    expect(() => resolveSettings(loaded)).toThrow(/experts_per_tok 5 is more than num_experts 4/);
  });

  it("reads null as not set for every key, as Oxidizr writes unused ones", () => {
    const text = OXIDIZR_MOE.replace("  num_experts: 4\n  experts_per_tok: 2\n  shared_expert_enabled: true\n  intermediate_size: 96\n", "  num_experts: null\n  experts_per_tok: null\n  intermediate_size: null\n  kv_latent_dim: null\n  mamba_layers: null\n")
      .replace("  batch_size: 4\n", "  batch_size: null\n  checkpoint_dir: null\n");
    const s = resolveSettings(load(text));
    expect(s.model.numExperts).toBeUndefined();
    expect(s.model.kvLatentDim).toBeUndefined();
    expect(s.batchSize).toBe(8);
    expect(s.outputDir).toBe("checkpoints/oxidizr");
    expect(load(text).givenKeys).not.toContain("model.num_experts");
  });

  it("trains Mamba3 layers from Oxidizr's keys; with mamba3_enabled off, names the Mamba3 keys it ignores", () => {
    const keys = "  mamba_layers: [0]\n  mamba3_enabled: true\n  mamba3_complex_rope: true\n  mamba3_use_conv: false\n  mamba3_mimo_rank: 4\n  mamba2_head_dim: 16\n  mamba2_state_size: 8\n";
    const on = OXIDIZR_MOE.replace("  rope_theta: 10000.0\n", `  rope_theta: 10000.0\n${keys}`);
    expect(resolveSettings(load(on)).model).toMatchObject({ mambaLayers: [0], mamba3Enabled: true, mamba3ComplexRope: true, mamba3UseConv: false, mamba3MimoRank: 4, mamba2HeadDim: 16 });
    const refusal = (t: string) => {
      try {
        resolveSettings(load(t));
      } catch (e) {
        return e as ConfigError;
      }
    };
    const odd = refusal(on.replace("mamba2_state_size: 8", "mamba2_state_size: 7"));
    expect(odd?.message).toMatch(/mamba2_state_size 7 is odd; mamba3_complex_rope turns the state as \(real, imaginary\) pairs/);
    expect(odd?.where).toMatch(/model\.mamba2_state_size/);
    expect(refusal(on.replace("mamba3_mimo_rank: 4", "mamba3_mimo_rank: 17"))?.message).toMatch(/mamba3_mimo_rank 17 x mamba2_head_dim 16 is past the scan's widest head \(256\)/);
    expect(refusal(on.replace("  mamba_layers: [0]\n", ""))?.message).toMatch(/mamba3_enabled asks for Mamba3 layers, but mamba_layers lists none/);
    const off = resolveSettings(load(on.replace("mamba3_enabled: true", "mamba3_enabled: false")));
    expect(off.model.mamba3Enabled).toBeUndefined();
    expect(ignoredKeysWarning(off.ignoredKeys)).toMatch(
      /^warning: kiln ignores model.mamba3_enabled, model.mamba3_complex_rope, model.mamba3_mimo_rank, model.mamba3_use_conv, .*\(a label, GRPO settings it does not implement; Mamba3 settings without mamba3_enabled: true\)$/,
    );
  });

  it("keeps max_steps: 0 an error without num_epochs", () => {
    expect(() => load(OXIDIZR_MOE.replace("  num_epochs: 2\n", ""))).toThrow(/trainer\.max_steps/);
  });
});
