import type { FloatDType } from "../dtype.js";
import type { ConformanceCase, ShapeClass } from "./case.js";

/** A conformance case before its kernel, dtype and full label are filled in (cases.ts). */
export type Def = Omit<ConformanceCase, "kernel" | "dtype" | "label"> & { label?: string };
export type Defs = (dtype: FloatDType) => Def[];

export const d = (shape: ShapeClass, args: Record<string, unknown>, extra: Partial<Def> = {}): Def => ({ shape, args, ...extra });
