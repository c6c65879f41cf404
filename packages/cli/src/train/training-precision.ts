import type { Backend, FloatDType } from "@kiln/contract";
import { chooseTrainingDType, settingSource } from "@kiln/core";
import type { RunSettings } from "@kiln/core";

/** The dtype a run trains in, and one line for the banner that says what that means and why. */
export interface TrainingPrecision {
  dtype: FloatDType;
  description: string;
}

const MEANING: Record<FloatDType, string> = {
  f32: "f32 throughout",
  bf16: "bf16 weights and activations, f32 master weights, gradients and AdamW state",
  f16: "f16 weights and activations with dynamic loss scaling, f32 master weights, gradients and AdamW state",
};

/** Resolves "auto" on the open backend; the banner's line names the flag that set the dtype, if one did. */
export function trainingPrecision(s: RunSettings, backend: Backend): TrainingPrecision {
  const source = settingSource(s, "trainer.dtype");
  const tf32 = s.tf32 ? "; TF32 matmuls allowed where the backend uses them" : "";
  if (s.dtype === "auto") {
    const { dtype, reason } = chooseTrainingDType(backend, s.model);
    return { dtype, description: `${dtype}: ${MEANING[dtype]} (auto, from ${source}: ${reason})${tf32}` };
  }
  return { dtype: s.dtype, description: `${s.dtype}: ${MEANING[s.dtype]} (${source})${tf32}` };
}
