import { type RunSettings, settingSource } from "../settings/run-settings.js";

/** How many optimizer steps a run takes, and which of its limits decides, in words for the banner. */
export interface StepLimit {
  total: number;
  /** The key whose limit ends the run. */
  decidedBy: "trainer.max_steps" | "trainer.num_epochs";
  /** "1857 (--num-epochs 1: 1 epoch of 1857 steps; ...)". */
  text: string;
}

type LimitSettings = Pick<RunSettings, "maxSteps" | "numEpochs" | "gradAccum" | "overridden" | "givenKeys" | "configPath" | "limitsSetAside">;

/**
 * The run's length: max_steps, or num_epochs passes over `batchesPerEpoch` micro-batches;
 * with both, whichever ends first (resolveSettings has already set aside the file's
 * limits where a flag gave one).
 */
export function stepLimit(s: LimitSettings, batchesPerEpoch: number): StepLimit {
  const epochSteps = s.numEpochs === undefined ? undefined : Math.max(1, Math.ceil((s.numEpochs * batchesPerEpoch) / s.gradAccum));
  const byEpochs = epochSteps !== undefined && (s.maxSteps === undefined || epochSteps < s.maxSteps);
  const total = byEpochs ? epochSteps : s.maxSteps!;
  const epochs = s.numEpochs === undefined ? "" : `${s.numEpochs} epoch${s.numEpochs === 1 ? "" : "s"} of ${Math.ceil(batchesPerEpoch / s.gradAccum)} steps`;
  const parts = [
    byEpochs ? `${settingSource(s, "trainer.num_epochs")}: ${epochs}` : settingSource(s, "trainer.max_steps"),
    ...(s.maxSteps !== undefined && s.numEpochs !== undefined
      ? [byEpochs ? `before ${settingSource(s, "trainer.max_steps")}` : `before ${settingSource(s, "trainer.num_epochs")} (${epochs})`]
      : []),
    ...s.limitsSetAside.map((l) => `the config's ${l} set aside by the flag`),
  ];
  return { total, decidedBy: byEpochs ? "trainer.num_epochs" : "trainer.max_steps", text: `${total} (${parts.join("; ")})` };
}
