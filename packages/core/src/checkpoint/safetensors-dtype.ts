import type { DType } from "@kiln/contract";

/**
 * Element types a safetensors file can name, with their sizes in bytes. Only
 * whole-byte types are listed; the sub-byte ones (F4, F6_*) are refused.
 */
const SAFETENSORS_DTYPE_SIZES = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E5M2: 1,
  F8_E4M3: 1,
  F8_E8M0: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  F64: 8,
  I64: 8,
  U64: 8,
} as const;

export type SafetensorsDType = keyof typeof SAFETENSORS_DTYPE_SIZES;

export const SAFETENSORS_DTYPES = Object.keys(SAFETENSORS_DTYPE_SIZES) as readonly SafetensorsDType[];

export function isSafetensorsDType(value: unknown): value is SafetensorsDType {
  return typeof value === "string" && Object.prototype.hasOwnProperty.call(SAFETENSORS_DTYPE_SIZES, value);
}

/** Bytes per element of a safetensors dtype. */
export function safetensorsDTypeSize(dtype: SafetensorsDType): number {
  return SAFETENSORS_DTYPE_SIZES[dtype];
}

const FROM_KILN: Record<DType, SafetensorsDType> = {
  f32: "F32",
  bf16: "BF16",
  f16: "F16",
  i32: "I32",
  u32: "U32",
  u16: "U16",
};

/** The safetensors name of a kiln dtype (`"bf16"` -> `"BF16"`). */
export function toSafetensorsDType(dtype: DType): SafetensorsDType {
  return FROM_KILN[dtype];
}

/** The kiln dtype for a safetensors dtype, or undefined when kiln has none (`"F64"`, `"I8"`, ...). */
export function fromSafetensorsDType(dtype: SafetensorsDType): DType | undefined {
  for (const [kiln, st] of Object.entries(FROM_KILN) as [DType, SafetensorsDType][]) {
    if (st === dtype) return kiln;
  }
  return undefined;
}
