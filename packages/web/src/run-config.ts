import { ConfigError } from "@kiln/contract";
import { NOT_ON_PAGE, type RunSettings, parseConfigText, resolveSettings } from "@kiln/core/browser";

/** A run as the page runs it: a kiln YAML config resolved by core's settings table (kiln train's keys, defaults and checks). */
export type RunConfig = RunSettings;

/** Where messages say the page's config came from. */
export const PAGE_CONFIG = "the config";

/**
 * Parses a kiln YAML config as kiln train does, with `steps` (the page's box) over
 * trainer.max_steps. The page trains in f32 on this tab's CPU: another dtype is refused;
 * `ignored` lists the trainer and data keys the file sets that the page leaves aside.
 */
export function parseRunConfig(text: string, steps?: number): { config: RunConfig; ignored: string[] } {
  const overrides = new Map(steps === undefined ? [] : [["trainer.max_steps", { value: steps, from: "the steps box" }]]);
  const parsed = parseConfigText(text, PAGE_CONFIG);
  const config = resolveSettings(parsed, overrides);
  if (config.dtype !== "f32") {
    throw new ConfigError(`trainer.dtype is ${JSON.stringify(config.dtype)}; the page trains in f32`, { where: `${PAGE_CONFIG} (trainer.dtype)`, hint: "remove trainer.dtype, or train with kiln train for bf16/f16" });
  }
  return { config, ignored: NOT_ON_PAGE.filter((key) => parsed.givenKeys.includes(key)) };
}
