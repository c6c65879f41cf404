import { describe, expect, it } from "vitest";
import { KernelArgumentError, createReferenceBackend, decodeElements, encodeToBytes, kernelSpecs } from "@kiln/contract";

// Mixed precision keeps parameter gradients in f32: the kernels that write them take
// 16-bit inputs and an f32 output (matmul's cDtype, the others' gradDtype).
describe("f32 gradient outputs of 16-bit kernels", () => {
  it("a bias gradient summing past 65504 is finite in f32 and infinite in f16", async () => {
    const b = createReferenceBackend();
    const rows = 300;
    const x = b.alloc(rows * 2);
    b.upload(x, encodeToBytes(new Float64Array(rows).fill(300), "f16"));
    const wide = b.alloc(4);
    const narrow = b.alloc(2);
    b.kernels.sumRows({ x, out: wide, rows, cols: 1, dtype: "f16", gradDtype: "f32" });
    b.kernels.sumRows({ x, out: narrow, rows, cols: 1, dtype: "f16" });
    const w = new Uint8Array(4), n = new Uint8Array(2);
    await b.download(wide, w);
    await b.download(narrow, n);
    expect(decodeElements(w, "f32", 1)[0]).toBe(90000);
    expect(decodeElements(n, "f16", 1)[0]).toBe(Infinity);
  });

  it("an f32 C accumulates without a 16-bit rounding", async () => {
    const b = createReferenceBackend();
    const a = b.alloc(2), bb = b.alloc(2), c = b.alloc(4);
    b.upload(a, encodeToBytes([1], "bf16"));
    b.upload(bb, encodeToBytes([2 ** -10], "bf16"));
    b.upload(c, encodeToBytes([1], "f32"));
    b.kernels.matmul({ a, b: bb, c, m: 1, n: 1, k: 1, accumulate: true, dtype: "bf16", cDtype: "f32" });
    const out = new Uint8Array(4);
    await b.download(c, out);
    // bf16 holds 8 significant bits: 1 + 2^-10 would round back to 1.
    expect(decodeElements(out, "f32", 1)[0]).toBe(1 + 2 ** -10);
  });

  it("declares the f32 output in the operand list, and only f32 or the kernel's dtype", () => {
    const dims = { rows: 4, dim: 8, dtype: "f16" as const, gradDtype: "f32" as const };
    const ops = kernelSpecs.rmsNormBackward.operands(dims as never);
    expect(ops.find((o) => o.key === "dWeight")?.dtype).toBe("f32");
    expect(ops.find((o) => o.key === "dX")?.dtype).toBe("f16");
    expect(() => kernelSpecs.rmsNormBackward.check({ ...dims, gradDtype: "bf16" } as never)).toThrow(KernelArgumentError);
    expect(() => kernelSpecs.matmul.check({ m: 1, n: 1, k: 1, dtype: "bf16", cDtype: "f16" } as never)).toThrow(/cDtype must be f32 or the kernel's dtype \(bf16\), got f16/);
  });
});
