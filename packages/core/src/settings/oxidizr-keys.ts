/**
 * Config files written for Oxidizr carry settings kiln has no use for; they are taken
 * out before the schema check and named in one warning instead of failing the run.
 */
const IGNORED: Readonly<Record<string, string>> = {
  "model.name": "a label",
  "trainer.group_size": "GRPO",
  "trainer.beta_kl": "GRPO",
};

type Mapping = Record<string, unknown>;
const isMapping = (v: unknown): v is Mapping => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Rewrites Oxidizr's spellings of "not set" (kv_heads: null, max_steps: 0 beside num_epochs)
 * as absent keys and drops the keys in IGNORED. Returns the dropped keys, as "section.key".
 */
export function takeOxidizrKeys(raw: Mapping): string[] {
  const dropped: string[] = [];
  const model = raw.model;
  const trainer = raw.trainer;
  if (isMapping(model) && model.kv_heads === null) delete model.kv_heads;
  if (isMapping(trainer) && trainer.max_steps === 0 && trainer.num_epochs !== undefined) delete trainer.max_steps;
  for (const full of Object.keys(IGNORED)) {
    const [section, key] = full.split(".");
    const m = raw[section];
    if (isMapping(m) && key in m) {
      delete m[key];
      dropped.push(full);
    }
  }
  return dropped;
}

/** The one warning naming the settings kiln left aside, or undefined when there are none. */
export function ignoredKeysWarning(keys: readonly string[]): string | undefined {
  if (keys.length === 0) return undefined;
  return `warning: kiln ignores ${keys.join(", ")} (${[...new Set(keys.map((k) => IGNORED[k]))].join(", ")} settings it does not implement)`;
}
