import { ConfigError } from "@kiln/contract";
import { type ModelConfig, MODEL_YAML_KEYS } from "@kiln/core";
import type { ModelSection } from "./schema.js";

/** The ModelConfig field each key of the YAML model section sets. */
export const MODEL_KEYS: Record<keyof ModelSection, keyof ModelConfig> = MODEL_YAML_KEYS;

/** The YAML model key that sets a ModelConfig field. */
export function yamlKeyOf(field: keyof ModelConfig): string {
  return Object.entries(MODEL_KEYS).find(([, f]) => f === field)?.[0] ?? field;
}

/** A model that comes with its weights (--init-from), and the file that describes it. */
export interface InitModel {
  model: ModelConfig;
  source: string;
}

/**
 * Checks that every key the YAML model section sets agrees with the model of the
 * weights training starts from; the first that does not is an error naming both values.
 */
export function checkModelAgrees(section: ModelSection, init: InitModel, file: string): void {
  for (const [key, field] of Object.entries(MODEL_KEYS) as [keyof ModelSection, keyof ModelConfig][]) {
    const yaml = section[key];
    if (yaml === undefined || JSON.stringify(yaml) === JSON.stringify(init.model[field])) continue;
    throw new ConfigError(`model.${key} is ${JSON.stringify(yaml)} in ${file}, but ${JSON.stringify(init.model[field])} in ${init.source}`, {
      where: `${file} (model.${key})`,
      hint: `the model comes from ${init.source}: remove model.${key} (or the whole model section) from ${file}, or start from other weights`,
    });
  }
}
