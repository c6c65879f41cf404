import { ConfigError } from "@kiln/contract";
import type { ModelConfig, ModelConfigInput } from "../model/config.js";
import { modelConfigProblem, resolveModelConfig } from "../model/architectures.js";
import { MODEL_SETTINGS } from "./model-settings.js";
import { type ModelSection, yamlKeyOf } from "./settings-table.js";

/** A model that comes with its weights (--init-from), and the file that describes it. */
export interface InitModel {
  model: ModelConfig;
  source: string;
}

const isUnset = (v: unknown) => v === undefined || v === 0 || (Array.isArray(v) && v.length === 0);

/**
 * The model a YAML model section describes, defaults filled (arch: llama) and its shape
 * checked; a problem is a ConfigError naming `file` and the key at fault.
 */
export function modelOfSection(m: ModelSection, file: string): ModelConfig {
  const input: Record<string, unknown> = { arch: "llama" };
  for (const [key, s] of Object.entries(MODEL_SETTINGS)) {
    const value = m[key as keyof ModelSection];
    if (value === undefined || ("zeroIsUnset" in s && s.zeroIsUnset && isUnset(value))) continue;
    input[s.field] = value;
  }
  const model = resolveModelConfig(input as unknown as ModelConfigInput);
  const problem = modelConfigProblem(model);
  if (problem) {
    const key = `model.${yamlKeyOf(problem.field)}`;
    throw new ConfigError(problem.message, { where: `${file} (${key})`, hint: problem.hint });
  }
  return model;
}

/**
 * Checks that every key the YAML model section sets agrees with the model of the
 * weights training starts from; the first that does not is an error naming both values.
 */
export function checkModelAgrees(section: ModelSection, init: InitModel, file: string): void {
  for (const [key, s] of Object.entries(MODEL_SETTINGS)) {
    const yaml = section[key as keyof ModelSection];
    const theirs = init.model[s.field];
    if (yaml === undefined || JSON.stringify(yaml) === JSON.stringify(theirs)) continue;
    throw new ConfigError(`model.${key} is ${JSON.stringify(yaml)} in ${file}, but ${JSON.stringify(theirs)} in ${init.source}`, {
      where: `${file} (model.${key})`,
      hint: `the model comes from ${init.source}: remove model.${key} (or the whole model section) from ${file}, or start from other weights`,
    });
  }
}
