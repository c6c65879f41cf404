import { ConfigError } from "@kiln/contract";
import type { WeightLayout } from "../ops/linear.js";
import type { LoraConfig } from "./config.js";
import type { ParamSpec } from "./param-layout.js";

/** The adapter pair of a base weight `<module>.weight`: `<module>.lora_A.weight` (rank, in) and `<module>.lora_B.weight` (out, rank), PEFT's names without its prefixes. */
export function adapterNames(weightName: string): { a: string; b: string } {
  const module = weightName.slice(0, -".weight".length);
  return { a: `${module}.lora_A.weight`, b: `${module}.lora_B.weight` };
}

/** The module name a LoRA target names: the last part of `<path>.<module>.weight`. */
export const moduleOf = (weightName: string) => weightName.split(".").at(-2)!;

/** The module names of the weight matrices among `specs`: what LoRA can target. */
export function matrixModules(specs: readonly ParamSpec[]): string[] {
  return [...new Set(specs.filter((s) => s.shape.length === 2 && s.name.endsWith(".weight")).map((s) => moduleOf(s.name)))];
}

/** Whether LoRA wraps this base parameter: a matrix `<path>.<target>.weight`. */
export function isLoraTarget(s: ParamSpec, lora: LoraConfig): boolean {
  return s.shape.length === 2 && s.name.endsWith(".weight") && lora.targets.includes(moduleOf(s.name));
}

/**
 * The base parameters, every one frozen, each targeted matrix followed by its adapters:
 * A initialised as PEFT does (torch's kaiming_uniform_ with a = sqrt(5): U(-1/sqrt(in),
 * 1/sqrt(in))), B zeros, so training starts from the base model's outputs. A target that
 * names no matrix of the model is refused, naming the module names it has.
 */
export function withLowRankAdapters(base: readonly ParamSpec[], lora: LoraConfig, layout: WeightLayout): ParamSpec[] {
  const out: ParamSpec[] = [];
  const hit = new Set<string>();
  for (const s of base) {
    out.push({ ...s, frozen: true });
    if (!isLoraTarget(s, lora)) continue;
    hit.add(moduleOf(s.name));
    const [outF, inF] = layout === "out_in" ? s.shape : [s.shape[1], s.shape[0]];
    const { a, b } = adapterNames(s.name);
    out.push(
      { name: a, shape: [lora.rank, inF], decay: true, init: { kind: "uniform", bound: 1 / Math.sqrt(inF) } },
      { name: b, shape: [outF, lora.rank], decay: true, init: { kind: "zeros" } },
    );
  }
  const missed = lora.targets.filter((t) => !hit.has(t));
  if (missed.length > 0) {
    const modules = matrixModules(base);
    throw new ConfigError(`LoRA target${missed.length === 1 ? "" : "s"} ${missed.join(", ")} name${missed.length === 1 ? "s" : ""} no weight matrix of this model`, {
      where: "--lora-targets",
      hint: `name modules the model has: ${modules.join(", ")}`,
    });
  }
  return out;
}
