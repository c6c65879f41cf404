import { expect, it } from "vitest";
import { supportMatrix } from "@kiln/contract/conformance";
import { KERNEL_NAMES, createReferenceBackend } from "@kiln/contract";

it("prints one markdown row per kernel with a mark per dtype", () => {
  const table = supportMatrix(createReferenceBackend()).split("\n");
  expect(table[0]).toBe("| kernel | f32 | bf16 | f16 | i32 | u32 | u16 |");
  expect(table).toHaveLength(2 + KERNEL_NAMES.length);
  expect(table).toContain("| matmul | ✓ | ✓ | ✓ | — | — | — |");
  expect(table).toContain("| fill | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ |");
});
