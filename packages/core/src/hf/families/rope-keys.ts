import type { RopeScaling } from "@kiln/contract";
import type { ModelConfig } from "../../model/config.js";
import type { HfConfigReader, Json } from "../hf-config-reader.js";

/** RoPE scaling kiln computes (contract RopeScaling), by transformers' rope_type. */
const ROPE_TYPES = ["default", "llama3", "linear"];

/**
 * RoPE base and scaling of config.json: transformers 5's rope_parameters { rope_type,
 * rope_theta, ...scaling }, else transformers 4's rope_theta and rope_scaling. No scaling
 * for rope_type "default" or a null rope_scaling; Llama 3's and linear scaling; any other
 * type (yarn, longrope, dynamic, ...) refused by name.
 */
export function readRope(r: HfConfigReader): { ropeTheta: number; ropeScaling?: RopeScaling } {
  const parameters = r.object("rope_parameters");
  const v4 = readRopeOf(r, "rope_scaling", r.object("rope_scaling"), r.json.rope_theta);
  if (!parameters) return v4;
  const v5 = readRopeOf(r, "rope_parameters", parameters, parameters.rope_theta ?? r.json.rope_theta);
  // Both generations' keys (kiln export writes both): they must say the same.
  const hasV4 = r.has("rope_scaling") || r.has("rope_theta");
  if (hasV4 && JSON.stringify(v4) !== JSON.stringify(v5)) {
    r.fail("rope_parameters", `rope_parameters says ${JSON.stringify(v5)} but rope_theta / rope_scaling say ${JSON.stringify(v4)}`, "make them agree, or keep one of them");
  }
  return v5;
}

function readRopeOf(r: HfConfigReader, key: string, scalingKeys: Json | undefined, theta: unknown = 10000): { ropeTheta: number; ropeScaling?: RopeScaling } {
  if (typeof theta !== "number" || !(theta > 0)) r.fail(key === "rope_parameters" ? "rope_parameters.rope_theta" : "rope_theta", `rope_theta is ${JSON.stringify(theta)}, not a positive number`, "fix the value in config.json");
  const scaling = ropeScalingOf(r, key, scalingKeys);
  return { ropeTheta: theta as number, ...(scaling ? { ropeScaling: scaling } : {}) };
}

/** The scaling of one rope_scaling / rope_parameters object (`key` names it in errors). */
export function ropeScalingOf(r: HfConfigReader, key: string, v: Json | undefined): RopeScaling | undefined {
  if (v === undefined) return undefined;
  // transformers 4 wrote "type" in older configs; "rope_type" since.
  const type = v.rope_type ?? v.type ?? "default";
  if (!ROPE_TYPES.includes(type as string)) {
    return r.fail(`${key}.rope_type`, `RoPE scaling of type ${JSON.stringify(type)} is not one kiln computes`, `kiln computes rope_type ${ROPE_TYPES.map((t) => JSON.stringify(t)).join(", ")}; pick a model with one of these`);
  }
  if (type === "default") return undefined;
  const positive = (name: string): number => {
    const n = v[name];
    return typeof n === "number" && n > 0 ? n : r.fail(`${key}.${name}`, `${key}.${name} is ${JSON.stringify(n)}, not a positive number`, `RoPE scaling of type ${JSON.stringify(type)} needs it; fix the value in config.json`);
  };
  if (v.attention_factor !== undefined && v.attention_factor !== null && v.attention_factor !== 1) {
    r.fail(`${key}.attention_factor`, `${key}.attention_factor is ${JSON.stringify(v.attention_factor)}; kiln scales attention by 1 with ${type} RoPE scaling`, "pick a model without attention_factor");
  }
  if (type === "linear") return { type, factor: positive("factor") };
  const scaling: RopeScaling = {
    type: "llama3",
    factor: positive("factor"),
    lowFreqFactor: positive("low_freq_factor"),
    highFreqFactor: positive("high_freq_factor"),
    originalMaxPositions: positive("original_max_position_embeddings"),
  };
  if (!(scaling.highFreqFactor > scaling.lowFreqFactor)) {
    r.fail(`${key}.high_freq_factor`, `high_freq_factor ${scaling.highFreqFactor} is not above low_freq_factor ${scaling.lowFreqFactor}`, "fix the values in config.json");
  }
  return scaling;
}

/** rope_scaling's keys for `s` (transformers 4), without rope_theta. */
export function scalingKeys(s: RopeScaling | undefined): Json | null {
  if (!s) return null;
  if (s.type === "linear") return { factor: s.factor, rope_type: "linear" };
  return { factor: s.factor, high_freq_factor: s.highFreqFactor, low_freq_factor: s.lowFreqFactor, original_max_position_embeddings: s.originalMaxPositions, rope_type: "llama3" };
}

/**
 * The RoPE keys of both transformers generations: rope_parameters (5) and rope_theta with
 * rope_scaling (4), saying the same; each reads its own and leaves the other's alone.
 */
export function ropeKeys(m: ModelConfig): Json {
  const scaling = scalingKeys(m.ropeScaling);
  return {
    rope_parameters: { ...(scaling ?? { rope_type: "default" }), rope_theta: m.ropeTheta },
    rope_scaling: scaling,
    rope_theta: m.ropeTheta,
  };
}
