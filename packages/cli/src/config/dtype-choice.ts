import { ConfigError } from "@kiln/contract";
import { TRAINING_DTYPE_CHOICES, type TrainingDTypeChoice } from "@kiln/core";

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
export const DTYPE_SPELLINGS: readonly string[] = [...TRAINING_DTYPE_CHOICES, ...Object.keys(SPELLINGS)];

/** The training dtype a spelling names ("bfloat16" -> "bf16"), or undefined. */
export function trainingDTypeOf(value: string): TrainingDTypeChoice | undefined {
  const v = value.toLowerCase();
  return (TRAINING_DTYPE_CHOICES as readonly string[]).includes(v) ? (v as TrainingDTypeChoice) : SPELLINGS[v];
}

/** The flags that can name a training dtype. */
export interface DTypeFlags {
  dtype?: TrainingDTypeChoice;
  bf16?: boolean;
  fp16?: boolean;
}

/** The dtype the flags ask for and the flag that asked, or undefined; refuses flags that disagree. */
export function dtypeFromFlags(flags: DTypeFlags): { dtype: TrainingDTypeChoice; flag: string } | undefined {
  const asked: { dtype: TrainingDTypeChoice; flag: string }[] = [
    ...(flags.dtype ? [{ dtype: flags.dtype, flag: `--dtype ${flags.dtype}` }] : []),
    ...(flags.bf16 ? [{ dtype: "bf16" as const, flag: "--bf16" }] : []),
    ...(flags.fp16 ? [{ dtype: "f16" as const, flag: "--fp16" }] : []),
  ];
  const differing = asked.filter((a) => a.dtype !== asked[0].dtype);
  if (differing.length > 0) {
    throw new ConfigError(`${asked[0].flag} and ${differing[0].flag} ask for different dtypes`, {
      where: differing[0].flag,
      hint: "pass one of --dtype f32|bf16|f16|auto, --bf16 or --fp16",
    });
  }
  return asked[0];
}
