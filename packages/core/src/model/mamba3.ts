import { SSD_MAX_HEAD_DIM, mamba3ScanForwardSpec } from "@kiln/contract";
import { conv1dCausal, gatherBlock, linear, linearPerHead, linearRows, mamba3Scan, rmsNorm, silu, swiGlu } from "../ops/index.js";
import type { ConfigProblem } from "./arch-def.js";
import { type Mamba3Settings, type ModelConfig, mamba3Of } from "./config.js";
import type { ParamSpec } from "./param-layout.js";
import type { Trace } from "./trace.js";

const bcWidth = (m: Mamba3Settings) => 2 * m.groups * m.stateSize;

/**
 * The Mamba3 mixer of one layer, on h (rows = B*T, C), with I = heads·headDim, G groups, N
 * state size, R the MIMO rank (Oxidizr's Mamba3Mixer names):
 *   [z | x | B | C | dt] = h·in_proj^T + bias            (rows, I | I | GN | GN | heads)
 *   x = silu(x)   (with mamba3_use_conv: [x | B | C] = silu(causal conv1d([x | B | C])) as in Mamba2)
 *   B, C = rmsnorm over each group's N (bc_norm, shared by B and C)
 *   λ = h·lambda_proj^T + b (heads), θ = h·theta_proj^T + b (heads·N/2, with the rotation)
 *   x = x·mimo_x_up^T + b per head (D → D·R, MIMO only)
 *   y = mamba3 scan(x, dt, λ, θ, B, C; b_bias, c_bias, dt_bias, A = -exp(A_log), D)
 *   y = y·mimo_x_down^T + b per head (D·R → D, MIMO only)
 *   out = rmsnorm(y · silu(z)) · out_proj^T + bias
 */
export function mamba3Mixer(t: Trace, h: number, n: string): number {
  const { g, config: c, p } = t;
  const m = mamba3Of(c)!;
  const I = m.inner, bcw = bcWidth(m);
  const rows = t.batch * t.seqLen;
  const W = p(`${n}.in_proj.weight`), Wb = p(`${n}.in_proj.bias`);
  const z = linearRows(g, h, W, 0, I, `${n}.z`, Wb);
  let x: number, bcRaw: number;
  if (m.useConv) {
    const seq = { batch: t.batch, seqLen: t.seqLen };
    const xbc = linearRows(g, h, W, I, I + bcw, `${n}.xbc_in`, Wb);
    const conv = silu(g, conv1dCausal(g, xbc, p(`${n}.conv1d.weight`), p(`${n}.conv1d.bias`), seq, `${n}.conv`), `${n}.xbc`);
    const slice = (offset: number, cols: number, name: string) => gatherBlock(g, conv, { offset, batchStride: 0, rowStride: I + bcw }, { batch: 1, rows, cols }, [rows, cols], name);
    x = slice(0, I, `${n}.x`);
    bcRaw = slice(I, bcw, `${n}.bc_in`);
  } else {
    x = silu(g, linearRows(g, h, W, I, I, `${n}.x_in`, Wb), `${n}.x`);
    bcRaw = linearRows(g, h, W, 2 * I, bcw, `${n}.bc_in`, Wb);
  }
  const dt = linearRows(g, h, W, 2 * I + bcw, m.heads, `${n}.dt`, Wb);
  const bc = rmsNorm(g, bcRaw, p(`${n}.bc_norm.weight`), c.normEps, `${n}.bc_norm`, m.stateSize);
  const lambda = linear(g, h, p(`${n}.lambda_proj.weight`), p(`${n}.lambda_proj.bias`), "out_in", `${n}.lambda`);
  const theta = m.rope ? linear(g, h, p(`${n}.theta_proj.weight`), p(`${n}.theta_proj.bias`), "out_in", `${n}.theta`) : undefined;
  const xs = m.mimoRank > 0 ? linearPerHead(g, x, p(`${n}.mimo_x_up.weight`), p(`${n}.mimo_x_up.bias`), m.heads, `${n}.x_up`) : x;
  const ys = mamba3Scan(
    g,
    { x: xs, dt, lambda, theta, bc },
    { bBias: p(`${n}.b_bias`), cBias: p(`${n}.c_bias`), dtBias: p(`${n}.dt_bias`), aLog: p(`${n}.A_log`), D: p(`${n}.D`) },
    { batch: t.batch, seqLen: t.seqLen, heads: m.heads, headDim: m.scanHeadDim, groups: m.groups, stateSize: m.stateSize, chunkSize: m.chunkSize },
    `${n}.scan`,
  );
  const y = m.mimoRank > 0 ? linearPerHead(g, ys, p(`${n}.mimo_x_down.weight`), p(`${n}.mimo_x_down.bias`), m.heads, `${n}.y_down`) : ys;
  const gated = swiGlu(g, z, y, `${n}.gated`);
  const normed = rmsNorm(g, gated, p(`${n}.norm.weight`), c.normEps, `${n}.norm`);
  return linear(g, normed, p(`${n}.out_proj.weight`), p(`${n}.out_proj.bias`), "out_in", `${n}.out`);
}

/** The parameters of mamba3Mixer, in the order of the forward. */
export function mamba3Params(n: string, c: ModelConfig): ParamSpec[] {
  const m = mamba3Of(c)!;
  const C = c.hiddenSize, I = m.inner, N = m.stateSize, H = m.heads, P = m.headDim, R = m.mimoRank;
  const w = (name: string, shape: number[], std = 0.02): ParamSpec => ({ name, shape, decay: true, init: { kind: "normal", std } });
  const fixed = (name: string, shape: number[], init: ParamSpec["init"]): ParamSpec => ({ name, shape, decay: false, init });
  const zeros = (name: string, size: number) => fixed(name, [size], { kind: "zeros" });
  const inWidth = 2 * I + bcWidth(m) + H;
  // A per-head projection starts as torch.nn.Linear's default spread (variance 1/(3·in)), so that
  // widening and narrowing each head keeps its scale.
  const perHead = (name: string, out: number, inF: number) => [w(`${name}.weight`, [out, inF], 1 / Math.sqrt(3 * inF)), zeros(`${name}.bias`, out)];
  return [
    w(`${n}.in_proj.weight`, [inWidth, C]),
    zeros(`${n}.in_proj.bias`, inWidth),
    ...(m.useConv
      ? [
          { name: `${n}.conv1d.weight`, shape: [I + bcWidth(m), m.convKernel], decay: true, init: { kind: "normal", std: 1 / Math.sqrt(3 * m.convKernel) } } satisfies ParamSpec,
          zeros(`${n}.conv1d.bias`, I + bcWidth(m)),
        ]
      : []),
    fixed(`${n}.bc_norm.weight`, [N], { kind: "ones" }),
    w(`${n}.lambda_proj.weight`, [H, C]),
    zeros(`${n}.lambda_proj.bias`, H),
    ...(m.rope ? [w(`${n}.theta_proj.weight`, [(H * N) / 2, C]), zeros(`${n}.theta_proj.bias`, (H * N) / 2)] : []),
    ...(R > 0 ? perHead(`${n}.mimo_x_up`, P * R, P) : []),
    fixed(`${n}.b_bias`, [H, N], { kind: "ones" }),
    fixed(`${n}.c_bias`, [H, N], { kind: "ones" }),
    fixed(`${n}.dt_bias`, [H], { kind: "ssmTimeStepBias" }),
    fixed(`${n}.A_log`, [H], { kind: "ssmDecayLog" }),
    fixed(`${n}.D`, [H], { kind: "ones" }),
    ...(R > 0 ? perHead(`${n}.mimo_x_down`, P, P * R) : []),
    fixed(`${n}.norm.weight`, [I], { kind: "ones" }),
    w(`${n}.out_proj.weight`, [C, I]),
    zeros(`${n}.out_proj.bias`, C),
  ];
}

/**
 * Forward FLOPs of one token over all Mamba3 layers beyond 2 x its parameters: the scans
 * (the contract's count for the chunked form) and the MIMO projections, whose weights every
 * head uses (heads - 1 more times than a parameter count says). 0 without Mamba3 layers.
 */
export function mamba3ExtraFlopsPerToken(c: ModelConfig, seqLen: number): number {
  const m = mamba3Of(c);
  if (!m) return 0;
  const dims = { batch: 1, seqLen, heads: m.heads, headDim: m.scanHeadDim, groups: m.groups, stateSize: m.stateSize, chunkSize: m.chunkSize };
  const scan = mamba3ScanForwardSpec.flops!(dims as never) / seqLen;
  const mimo = m.mimoRank > 0 ? 2 * (m.heads - 1) * 2 * m.headDim * m.scanHeadDim : 0;
  return m.layers.size * (scan + mimo);
}

/** The first Mamba3 setting of `c` kiln cannot build, if any (the sizes are Mamba2's, checked there). */
export function mamba3Problem(c: ModelConfig): ConfigProblem | undefined {
  if (!c.mamba3Enabled) return undefined;
  if (!c.mambaLayers?.length) {
    return { field: "mamba3Enabled", message: "mamba3_enabled asks for Mamba3 layers, but mamba_layers lists none", hint: "list the Mamba3 layers in mamba_layers (e.g. [0, 1, 2]), or remove mamba3_enabled" };
  }
  const m = mamba3Of(c)!;
  if (m.rope && m.stateSize % 2 !== 0) {
    return {
      field: "mamba2StateSize",
      message: `mamba2_state_size ${m.stateSize} is odd; mamba3_complex_rope turns the state as (real, imaginary) pairs`,
      hint: `set mamba2_state_size to an even size (e.g. ${m.stateSize + 1}), or mamba3_complex_rope: false`,
    };
  }
  if (!Number.isInteger(m.mimoRank) || m.mimoRank < 0 || m.headDim * Math.max(1, m.mimoRank) > SSD_MAX_HEAD_DIM) {
    const most = Math.floor(SSD_MAX_HEAD_DIM / Math.max(1, m.headDim));
    return { field: "mamba3MimoRank", message: `mamba3_mimo_rank ${m.mimoRank} x mamba2_head_dim ${m.headDim} is past the scan's widest head (${SSD_MAX_HEAD_DIM})`, hint: `set mamba3_mimo_rank from 0 (SISO) to ${most}` };
  }
  return undefined;
}
