import type { ModelConfig, ModelConfigInput } from "./config.js";
import type { ParamSpec } from "./param-layout.js";
import type { Trace } from "./trace.js";
import type { WeightLayout } from "../ops/linear.js";

/** A shape an architecture cannot build: the config field at fault, what is wrong, what to do. */
export interface ConfigProblem {
  field: keyof ModelConfig;
  message: string;
  hint: string;
}

/**
 * Everything kiln knows about one architecture, in one place: its config
 * defaults and checks, its parameters (Hugging Face names, shapes, init), its
 * forward pass, its recompute blocks and its FLOPs.
 */
export interface ArchDef {
  /** Defaults of the fields a config may leave out that depend on the architecture. */
  defaults(c: ModelConfigInput): Pick<ModelConfig, "intermediateSize" | "normEps" | "tieEmbeddings">;
  /** The first shape this architecture cannot build (beyond the checks every architecture shares), if any. */
  check(c: ModelConfig): ConfigProblem | undefined;
  /** Every parameter, in the order of the flat parameter buffer. */
  params(c: ModelConfig): ParamSpec[];
  /** Learned position embeddings: the graph takes a constant i32 `position_ids` input. */
  positionIds: boolean;
  /**
   * Traces the forward pass from token ids (and positions when `positionIds`) to the final
   * normed hidden states (rows, hidden) and the output weight (vocab, hidden) whose product
   * is the logits; the graph builders make the logits (or the loss by row chunks) from them.
   */
  forward(t: Trace, ids: number, positions: number | undefined): { hidden: number; head: number };
  /** How its linear layers store their weights: (out, in) as torch.nn.Linear, or (in, out) as GPT-2's Conv1D. */
  linearLayout: WeightLayout;
  /** Module names LoRA wraps when a run names none: the attention and MLP projections. */
  loraTargets: readonly string[];
  /** Scope prefix of the repeated blocks ("model.layers" for "model.layers.3"): the unit of `--recompute blocks`. */
  blockPrefix: string;
  /**
   * Parameters a token's forward pass multiplies by nothing: learned positions (a lookup),
   * the experts it is not routed to. Left out of the 6-FLOPs-per-parameter count; the
   * rest are the active parameters.
   */
  inactiveParams(c: ModelConfig): number;
}
