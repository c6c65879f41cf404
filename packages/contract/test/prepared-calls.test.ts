import { describe, expect, it } from "vitest";
import { type Backend, createReferenceBackend } from "@kiln/contract";
import { checkConformance, throughPrepare } from "@kiln/contract/conformance";

const only = (kernel: string) => ({ filter: (c: { kernel: string }) => c.kernel === kernel, dtypes: ["f32"] as const });

/**
 * The reference backend with a `prepare` whose calls take kernel scratch (4 bytes a row,
 * kept as the largest so far, as a scratch block grows): reserved when the call is
 * prepared, or only when it is issued (`reserves: false`), each issue then taking 4
 * bytes more than any before.
 */
function scratchBackend(reserves: boolean): Backend {
  const ref = createReferenceBackend();
  let scratch = 0;
  const grow = (bytes: number) => void (scratch = Math.max(scratch, bytes));
  return {
    ...ref,
    memoryStats: () => ({ ...ref.memoryStats(), kernelScratchBytes: scratch }),
    prepare: (kernel, args) => {
      const bytes = 4 * (args as { rows: number }).rows;
      if (reserves) grow(bytes);
      return () => {
        grow(reserves ? bytes : scratch + 4);
        (ref.kernels[kernel] as (a: typeof args) => void)(args);
      };
    },
  };
}

describe("conformance through prepare (the prepared option)", () => {
  it("passes a backend whose preparation reserves what its calls take", async () => {
    const outcomes = await checkConformance(scratchBackend(true), { ...only("sumRows"), prepared: true });
    expect(outcomes.length).toBeGreaterThan(3);
    for (const o of outcomes) expect(o.status, `${o.name}: ${o.details}`).toBe("passed");
  });

  it("fails a call that takes more kernel scratch when issued than preparing it reserved, naming both sizes", async () => {
    const outcomes = await checkConformance(scratchBackend(false), { ...only("sumRows"), prepared: true });
    expect(outcomes.length).toBeGreaterThan(3);
    for (const o of outcomes) {
      expect(o.status, o.name).toBe("failed");
      const sizes = /sumRows took (\d+) bytes of kernel scratch when issued; preparing it reserved (\d+)/.exec(o.details.join());
      expect(sizes, o.details.join()).not.toBeNull();
      expect(Number(sizes![1])).toBeGreaterThan(Number(sizes![2]));
    }
  });

  it("leaves a backend without prepare as it is", () => {
    const ref = createReferenceBackend();
    expect(throughPrepare(ref)).toBe(ref);
  });
});
