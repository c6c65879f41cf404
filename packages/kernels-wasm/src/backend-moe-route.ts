import { FLOAT_DTYPES, type MoeRouteArgs, type MoeRouteBackwardArgs, moeRouteBackwardSpec, moeRouteSpec } from "@kiln/contract";
import { callScratch } from "./call-scratch.js";
import { checkIndices } from "./check-indices.js";
import type { WasmKernelContext, WasmKernelTable } from "./kernel-table.js";
import { operandAddresses } from "./operand-addresses.js";
import { storageDtypeCode } from "./storage-dtype.js";
import { threadsForWork } from "./work-threads.js";

/** Word index of each field of RouteArgs and RouteBackwardArgs in csrc/moe_route.c. */
const ROUTE = { tokens: 0, numExperts: 1, topK: 2, dtype: 3, alpha: 4, logits: 5, probs: 6, experts: 7, weights: 8, offsets: 9, slots: 10, auxLoss: 11, scratch: 12 } as const;
const BACKWARD = {
  tokens: 0, numExperts: 1, topK: 2, dtype: 3, alpha: 4, auxScale: 5, dWeights: 6, weights: 7,
  experts: 8, probs: 9, offsets: 10, dLogits: 11, scratch: 12, rowFloats: 13,
} as const;

/** Rough flops per logit of a routed row (exp, softmax, top-k compares), to decide how many threads to wake. */
const LOGIT_COST = 30;

/** Picks each token's experts and weights (threads split the tokens), then counts, offsets, slots and auxLoss (one thread). */
function runMoeRoute(ctx: WasmKernelContext, args: MoeRouteArgs): void {
  moeRouteSpec.check(args);
  const dtype = storageDtypeCode("moeRoute", args.dtype);
  const at = operandAddresses(moeRouteSpec, ctx.memory, args);
  const { rt } = ctx;
  const scratch = callScratch(rt, args.numExperts * 12);
  const { u32, f32 } = rt.argsViews();
  u32[ROUTE.tokens] = args.tokens;
  u32[ROUTE.numExperts] = args.numExperts;
  u32[ROUTE.topK] = args.topK;
  u32[ROUTE.dtype] = dtype;
  f32[ROUTE.alpha] = args.alpha;
  u32[ROUTE.logits] = at.logits.ptr;
  u32[ROUTE.probs] = at.probs.ptr;
  u32[ROUTE.experts] = at.experts.ptr;
  u32[ROUTE.weights] = at.weights.ptr;
  u32[ROUTE.offsets] = at.offsets.ptr;
  u32[ROUTE.slots] = at.slots.ptr;
  u32[ROUTE.auxLoss] = at.auxLoss.ptr;
  u32[ROUTE.scratch] = scratch;
  rt.run("kiln_moe_route", threadsForWork(rt, args.tokens, args.numExperts * (LOGIT_COST + args.topK)));
  rt.run("kiln_moe_route_offsets", 1);
}

/** dLogits, one row per token (threads split the tokens), each built in f32 in the thread's scratch. */
function runMoeRouteBackward(ctx: WasmKernelContext, args: MoeRouteBackwardArgs): void {
  moeRouteBackwardSpec.check(args);
  const dtype = storageDtypeCode("moeRouteBackward", args.dtype);
  const at = operandAddresses(moeRouteBackwardSpec, ctx.memory, args);
  const { rt } = ctx;
  checkIndices(rt, "moeRouteBackward", at.experts.ptr, args.tokens * args.topK, args.numExperts, "experts must be the expert indices moeRoute wrote");
  const rowFloats = Math.ceil(args.numExperts / 4) * 4;
  const scratch = callScratch(rt, rt.info.threads * 2 * rowFloats * 4);
  const { u32, f32 } = rt.argsViews();
  u32[BACKWARD.tokens] = args.tokens;
  u32[BACKWARD.numExperts] = args.numExperts;
  u32[BACKWARD.topK] = args.topK;
  u32[BACKWARD.dtype] = dtype;
  f32[BACKWARD.alpha] = args.alpha;
  f32[BACKWARD.auxScale] = args.auxScale;
  u32[BACKWARD.dWeights] = at.dWeights.ptr;
  u32[BACKWARD.weights] = at.weights.ptr;
  u32[BACKWARD.experts] = at.experts.ptr;
  u32[BACKWARD.probs] = at.probs.ptr;
  u32[BACKWARD.offsets] = at.offsets.ptr;
  u32[BACKWARD.dLogits] = at.dLogits.ptr;
  u32[BACKWARD.scratch] = scratch;
  u32[BACKWARD.rowFloats] = rowFloats;
  rt.run("kiln_moe_route_backward", threadsForWork(rt, args.tokens, 4 * args.numExperts + 4 * args.topK));
}

/** Mixture-of-experts top-k routing and its gradient (csrc/moe_route.c), in f32, bf16 and f16; probs f32, indices i32. */
export const MOE_ROUTE_KERNELS = {
  moeRoute: { dtypes: FLOAT_DTYPES, run: runMoeRoute },
  moeRouteBackward: { dtypes: FLOAT_DTYPES, run: runMoeRouteBackward },
} satisfies WasmKernelTable;
