import { TRAINING_DTYPE_CHOICES, type TrainingDTypeChoice } from "../train/training-dtype.js";

/** Other names users bring for the training dtypes (PyTorch's, Hugging Face's, DeepSpeed's). */
const SPELLINGS: Readonly<Record<string, TrainingDTypeChoice>> = {
  fp32: "f32",
  float32: "f32",
  bfloat16: "bf16",
  fp16: "f16",
  float16: "f16",
  half: "f16",
};

/** Every spelling `--dtype` and `trainer.dtype` accept. */
export const DTYPE_SPELLINGS = [...TRAINING_DTYPE_CHOICES, ...Object.keys(SPELLINGS)] as [string, ...string[]];

/** The training dtype a spelling names ("bfloat16" -> "bf16"), or undefined. */
export function trainingDTypeOf(value: string): TrainingDTypeChoice | undefined {
  const v = value.toLowerCase();
  return (TRAINING_DTYPE_CHOICES as readonly string[]).includes(v) ? (v as TrainingDTypeChoice) : SPELLINGS[v];
}
