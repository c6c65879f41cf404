/** Storage element types. Floats compute in f32 (accumulate in f32); i32 holds token ids. */
export type FloatDType = "f32" | "bf16" | "f16";
export type IndexDType = "i32" | "u32" | "u16";
export type DType = FloatDType | IndexDType;

export const FLOAT_DTYPES: readonly FloatDType[] = ["f32", "bf16", "f16"];
export const ALL_DTYPES: readonly DType[] = ["f32", "bf16", "f16", "i32", "u32", "u16"];

const BYTES: Record<DType, number> = { f32: 4, bf16: 2, f16: 2, i32: 4, u32: 4, u16: 2 };

/** Bytes per element of a dtype. */
export function bytesPerElement(dtype: DType): number {
  return BYTES[dtype];
}

export function isFloatDType(dtype: DType): dtype is FloatDType {
  return dtype === "f32" || dtype === "bf16" || dtype === "f16";
}
