/**
 * The GGUF container (version 3), from its specification (the gguf document in ggml's repository), all
 * little-endian:
 *   u32 magic "GGUF", u32 version, u64 tensor count, u64 metadata count;
 *   metadata: string key, u32 value type, value (strings are u64 length + UTF-8 bytes;
 *     arrays are u32 element type, u64 count, elements);
 *   tensor infos: string name, u32 dims, u64 ne[dims] (ne[0] the fastest-varying, i.e. a
 *     row's length), u32 ggml type, u64 offset into the data section;
 *   padding to `general.alignment` (default 32), then the data section, each tensor at an
 *   aligned offset.
 */
export const GGUF_MAGIC = 0x46554747;
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32;

/** Metadata value types by their code. */
export const GGUF_VALUE_TYPES = ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"] as const;
export type GgufValueType = (typeof GGUF_VALUE_TYPES)[number];
export type GgufScalarType = Exclude<GgufValueType, "array">;

/** A typed metadata value: a scalar, or an array of one scalar type (arrays of arrays are not written). */
export type GgufValue =
  | { type: Exclude<GgufScalarType, "string" | "bool" | "u64" | "i64">; value: number }
  | { type: "u64" | "i64"; value: bigint }
  | { type: "bool"; value: boolean }
  | { type: "string"; value: string }
  | { type: "array"; itemType: GgufScalarType; values: readonly (number | bigint | boolean | string)[] };

/** Bytes of one fixed-size scalar. */
export const SCALAR_BYTES: Readonly<Record<Exclude<GgufScalarType, "string">, number>> = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, f32: 4, bool: 1, u64: 8, i64: 8, f64: 8 };

/** The ggml tensor types kiln writes and reads: code, elements per block, bytes per block. */
export const GGML_TYPES = {
  f32: { code: 0, block: 1, bytes: 4 },
  f16: { code: 1, block: 1, bytes: 2 },
  // 32 int8 values and their f16 scale d: x = d * q.
  q8_0: { code: 8, block: 32, bytes: 34 },
  bf16: { code: 30, block: 1, bytes: 2 },
} as const;
export type GgmlType = keyof typeof GGML_TYPES;

export const ggmlTypeOfCode = (code: number): GgmlType | undefined => (Object.keys(GGML_TYPES) as GgmlType[]).find((t) => GGML_TYPES[t].code === code);

/** Bytes of `elements` values of `type` (elements a multiple of the type's block). */
export function ggmlBytes(type: GgmlType, elements: number): number {
  const t = GGML_TYPES[type];
  return (elements / t.block) * t.bytes;
}

/** A tensor of a GGUF file: ne as ggml counts it (ne[0] = a row's length), its type and data. */
export interface GgufTensor {
  name: string;
  ne: number[];
  type: GgmlType;
}

export const alignUp = (n: number, alignment: number) => Math.ceil(n / alignment) * alignment;
