/** Oxidizr's Mamba3 keys: with mamba3_enabled not true they mean nothing. */
export const MAMBA3_KEYS = ["mamba3_enabled", "mamba3_complex_rope", "mamba3_mimo_rank", "mamba3_use_conv"] as const;

/**
 * Config files written for Oxidizr carry settings kiln has no use for; they are taken
 * out before the schema check and named in one warning instead of failing the run.
 */
const IGNORED: Readonly<Record<string, string>> = {
  "model.name": "a label",
  "trainer.group_size": "GRPO",
  "trainer.beta_kl": "GRPO",
};

/** Why a dropped key was left aside: its IGNORED group, or Mamba3's keys without mamba3_enabled. */
const MAMBA3_UNUSED = "Mamba3 settings without mamba3_enabled: true";
const reasonOf = (key: string) => IGNORED[key] ?? MAMBA3_UNUSED;

type Mapping = Record<string, unknown>;
const isMapping = (v: unknown): v is Mapping => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Rewrites Oxidizr's spellings of "not set" (any key: null, as in kv_heads: null or
 * num_experts: null; max_steps: 0 beside num_epochs) as absent keys, and drops the keys in
 * IGNORED and, with mamba3_enabled not true, the Mamba3 keys. Returns the dropped keys
 * that had a value, as "section.key".
 */
export function takeOxidizrKeys(raw: Mapping): string[] {
  const dropped: string[] = [];
  for (const section of Object.values(raw)) {
    if (!isMapping(section)) continue;
    for (const [key, value] of Object.entries(section)) if (value === null) delete section[key];
  }
  const model = raw.model;
  const trainer = raw.trainer;
  if (isMapping(model) && model.mamba3_enabled !== true) {
    for (const key of MAMBA3_KEYS) {
      if (!(key in model)) continue;
      delete model[key];
      dropped.push(`model.${key}`);
    }
  }
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
  const groups = [...new Set(keys.map(reasonOf))];
  const unused = groups.filter((g) => g !== MAMBA3_UNUSED);
  const why = [...(unused.length ? [`${unused.join(", ")} settings it does not implement`] : []), ...groups.filter((g) => g === MAMBA3_UNUSED)];
  return `warning: kiln ignores ${keys.join(", ")} (${why.join("; ")})`;
}
