import { type DType, type FloatDType, KernelArgumentError, isFloatDType, wideDtype } from "@kiln/contract";

/** Dtype codes of csrc/kiln_storage.h (KILN_DT_*). */
const CODES: Record<FloatDType, number> = { f32: 0, bf16: 1, f16: 2 };

/** The C code of a float storage dtype; anything else is a KernelArgumentError naming `kernel`. */
export function storageDtypeCode(kernel: string, dtype: DType): number {
  if (!isFloatDType(dtype)) {
    throw new KernelArgumentError(`dtype ${String(dtype)} is not a float dtype`, {
      where: kernel,
      hint: "use f32, bf16 or f16 (capabilities().kernelDTypes lists what each kernel takes)",
    });
  }
  return CODES[dtype];
}

/**
 * The C code of a kernel's parameter-gradient output: `gradDtype` when given (f32 for
 * 16-bit inputs in mixed precision; the spec's check has already ruled out anything
 * else), else the kernel's `dtype`.
 */
export function gradDtypeCode(kernel: string, dtype: FloatDType, gradDtype: FloatDType | undefined): number {
  return storageDtypeCode(kernel, wideDtype(dtype, gradDtype));
}
