import { CONV1D_MAX_KERNEL_SIZE, SSD_MAX_CHUNK_SIZE, SSD_MAX_HEAD_DIM, SSD_MAX_STATE_SIZE, ssdScanForwardSpec } from "@kiln/contract";
import { conv1dCausal, linear, linearRows, rmsNorm, silu, ssdScan, swiGlu } from "../ops/index.js";
import type { ConfigProblem } from "./arch-def.js";
import { type ModelConfig, type MambaSettings, mambaOf } from "./config.js";
import type { ParamSpec } from "./param-layout.js";
import type { Trace } from "./trace.js";

/** Width of the convolved rows [x | B | C]. */
const convWidth = (m: MambaSettings) => m.inner + 2 * m.groups * m.stateSize;

/**
 * The Mamba2 mixer of one layer (state space duality), on h (rows = B*T, C), with I = inner
 * width = heads·headDim, G groups, N state size (Hugging Face Mamba2Mixer names):
 *   [z | xBC | dt] = h·in_proj^T            (rows, I | I + 2GN | heads), three row blocks of one weight
 *   xBC = silu(causal depthwise conv1d(xBC))   [x | B | C]
 *   y   = ssd scan(x, dt, B, C; dt_bias, A = -exp(A_log), D)   (rows, I)
 *   out = rmsnorm(y · silu(z)) · out_proj^T     (the gated RMSNorm over all I channels)
 */
export function mamba2Mixer(t: Trace, h: number, n: string): number {
  const { g, config: c, p } = t;
  const m = mambaOf(c)!;
  const W = p(`${n}.in_proj.weight`);
  const z = linearRows(g, h, W, 0, m.inner, `${n}.z`);
  const xbc = linearRows(g, h, W, m.inner, convWidth(m), `${n}.xbc_in`);
  const dt = linearRows(g, h, W, m.inner + convWidth(m), m.heads, `${n}.dt`);
  const seq = { batch: t.batch, seqLen: t.seqLen };
  const conv = silu(g, conv1dCausal(g, xbc, p(`${n}.conv1d.weight`), p(`${n}.conv1d.bias`), seq, `${n}.conv`), `${n}.xbc`);
  const y = ssdScan(
    g,
    conv,
    dt,
    { dtBias: p(`${n}.dt_bias`), aLog: p(`${n}.A_log`), D: p(`${n}.D`) },
    { ...seq, heads: m.heads, headDim: m.headDim, groups: m.groups, stateSize: m.stateSize, chunkSize: m.chunkSize },
    `${n}.ssd`,
  );
  const gated = swiGlu(g, z, y, `${n}.gated`);
  const normed = rmsNorm(g, gated, p(`${n}.norm.weight`), c.normEps, `${n}.norm`);
  return linear(g, normed, p(`${n}.out_proj.weight`), undefined, "out_in", `${n}.out`);
}

/** The parameters of mamba2Mixer, in the order of the forward. */
export function mamba2Params(n: string, c: ModelConfig): ParamSpec[] {
  const m = mambaOf(c)!;
  const C = c.hiddenSize;
  const w = (name: string, shape: number[]): ParamSpec => ({ name, shape, decay: true, init: { kind: "normal", std: 0.02 } });
  const perHead = (name: string, init: ParamSpec["init"]): ParamSpec => ({ name, shape: [m.heads], decay: false, init });
  return [
    w(`${n}.in_proj.weight`, [m.inner + convWidth(m) + m.heads, C]),
    // PyTorch's default depthwise Conv1d init has variance 1/(3K): a normal of the same spread.
    { name: `${n}.conv1d.weight`, shape: [convWidth(m), m.convKernel], decay: true, init: { kind: "normal", std: 1 / Math.sqrt(3 * m.convKernel) } },
    { name: `${n}.conv1d.bias`, shape: [convWidth(m)], decay: false, init: { kind: "zeros" } },
    perHead(`${n}.dt_bias`, { kind: "ssmTimeStepBias" }),
    perHead(`${n}.A_log`, { kind: "ssmDecayLog" }),
    perHead(`${n}.D`, { kind: "ones" }),
    { name: `${n}.norm.weight`, shape: [m.inner], decay: false, init: { kind: "ones" } },
    w(`${n}.out_proj.weight`, [C, m.inner]),
  ];
}

/** Forward FLOPs of the SSD scans of one token over all Mamba2 layers (0 without any). */
export function mamba2ScanFlopsPerToken(c: ModelConfig, seqLen: number): number {
  const m = mambaOf(c);
  if (!m) return 0;
  const dims = { batch: 1, seqLen, heads: m.heads, headDim: m.headDim, groups: m.groups, stateSize: m.stateSize, chunkSize: m.chunkSize };
  return (m.layers.size * ssdScanForwardSpec.flops!(dims as never)) / seqLen;
}

/** The first Mamba2 setting of `c` kiln cannot build, if any. */
export function mamba2Problem(c: ModelConfig): ConfigProblem | undefined {
  const m = mambaOf(c);
  if (!m) return undefined;
  const bad = c.mambaLayers!.find((i) => !Number.isInteger(i) || i < 0 || i >= c.numLayers);
  if (bad !== undefined) {
    return { field: "mambaLayers", message: `mamba_layers names layer ${bad}, but the model has layers 0..${c.numLayers - 1}`, hint: `list layer indices from 0 to ${c.numLayers - 1}` };
  }
  if (new Set(c.mambaLayers).size !== c.mambaLayers!.length) {
    return { field: "mambaLayers", message: "mamba_layers names a layer twice", hint: "list each Mamba2 layer once" };
  }
  if (!Number.isInteger(m.heads) || !Number.isInteger(m.headDim) || m.heads * m.headDim !== m.inner) {
    return {
      field: "mamba2NumHeads",
      message: `hidden_size ${c.hiddenSize} x mamba2_expand ${m.expand} = ${m.inner} is not mamba2_num_heads ${fmt(m.heads)} x mamba2_head_dim ${fmt(m.headDim)}`,
      hint: `pick mamba2_num_heads and mamba2_head_dim whose product is ${m.inner} (e.g. ${Math.max(1, Math.round(m.inner / 64))} heads of ${m.inner / Math.max(1, Math.round(m.inner / 64))})`,
    };
  }
  if (m.heads % m.groups !== 0) {
    return { field: "mamba2NGroups", message: `mamba2_n_groups ${m.groups} does not divide the ${m.heads} Mamba2 heads`, hint: "pick a number of groups that divides mamba2_num_heads (1 shares B and C across all heads)" };
  }
  const limits: [keyof ModelConfig, string, number, number][] = [
    ["mamba2HeadDim", "mamba2_head_dim", m.headDim, SSD_MAX_HEAD_DIM],
    ["mamba2StateSize", "mamba2_state_size", m.stateSize, SSD_MAX_STATE_SIZE],
    ["mamba2ChunkSize", "mamba2_chunk_size", m.chunkSize, SSD_MAX_CHUNK_SIZE],
    ["mamba2ConvKernel", "mamba2_conv_kernel", m.convKernel, CONV1D_MAX_KERNEL_SIZE],
  ];
  for (const [field, key, value, max] of limits) {
    if (!Number.isInteger(value) || value < 1 || value > max) return { field, message: `${key} ${value} is outside 1..${max}`, hint: `set ${key} to a whole number from 1 to ${max}` };
  }
  return undefined;
}

const fmt = (v: number) => (Number.isInteger(v) ? String(v) : v.toFixed(2));
