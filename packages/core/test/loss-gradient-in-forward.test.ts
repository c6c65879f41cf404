import { afterAll, describe, expect, it } from "vitest";
import { type Backend, type FloatDType, encodeToBytes } from "@kiln/contract";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { createCudaSimBackend, cudaStatus } from "@kiln/kernels-cuda";
import { kernelNodeAttrs } from "../src/graph/kernel-node.js";
import { tinyModels } from "./support/tiny-models.js";
import { planTraining } from "../src/train/plan-training.js";

const attrsOf = kernelNodeAttrs;

describe("the training loss writes the logits' gradient in its forward call", () => {
  for (const [arch, model] of Object.entries(tinyModels)) {
    for (const kind of ["cpu", "gpu"] as const) {
      it(`${arch} on a ${kind}: no crossEntropyBackward; every chunk's crossEntropyForward writes dLogits over its logits`, () => {
        const { graph, step } = planTraining(model, 4, 8, "bf16", "none", kind);
        const nodes = graph.graph.nodes;
        expect(nodes.filter((n) => attrsOf(n).kernel === "crossEntropyBackward")).toEqual([]);
        const losses = nodes.filter((n) => attrsOf(n).kernel === "crossEntropyForward");
        expect(losses.length).toBeGreaterThan(0);
        for (const n of losses) {
          const { logits, dLogits } = attrsOf(n).operands;
          expect(dLogits).toBeDefined();
          expect(attrsOf(n).runtimeArgs).toEqual({ lossScale: "lossScale" });
          expect(step.arena.offsets.get(dLogits.id)).toBe(step.arena.offsets.get(logits.id));
        }
      });
    }
  }
});

const backends: [string, () => Promise<Backend> | Backend][] = [
  ["wasm", () => createWasmBackend({ threads: 2, measurePeak: false })],
  ...(cudaStatus().simulator.built ? [["cuda-sim", () => createCudaSimBackend()] as [string, () => Backend]] : []),
];

/** Logits in [-6, 6) as dtype bytes and targets with row 1 ignored. */
function inputs(rows: number, vocab: number, dtype: FloatDType) {
  let s = 11;
  const rand = () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const logits = encodeToBytes(Float64Array.from({ length: rows * vocab }, () => rand() * 12 - 6), dtype);
  const targets = Int32Array.from({ length: rows }, (_, r) => (r === 1 ? -1 : Math.floor(rand() * vocab)));
  return { logits, targets: new Uint8Array(targets.buffer) };
}

/** Whether two byte arrays hold the same bytes (one comparison, not one assertion per byte). */
const sameBytes = (a: Uint8Array, b: Uint8Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

describe("crossEntropyForward with dLogits gives the bits of crossEntropyForward and then crossEntropyBackward", () => {
  const opened = new Map<string, Promise<Backend>>();
  afterAll(async () => {
    for (const b of opened.values()) (await b).dispose?.();
  });
  for (const [name, create] of backends) {
    const open = () => {
      if (!opened.has(name)) opened.set(name, Promise.resolve(create()));
      return opened.get(name)!;
    };
    for (const dtype of ["f32", "bf16", "f16"] as const) {
      // 264: 16-byte rows the simulator keeps in shared memory; 50304: GPT-2's padded rows (read twice there); 31: unaligned rows.
      for (const vocab of dtype === "bf16" ? [264, 50304, 31] : [264, 31]) {
        for (const inPlace of [false, true]) {
          it(`${name} ${dtype} vocab ${vocab}${inPlace ? ", dLogits over logits" : ""}`, async () => {
            const backend = await open();
            const rows = vocab > 1000 ? 3 : 5;
            const lossScale = 0.37;
            const data = inputs(rows, vocab, dtype);
            const upload = (bytes: Uint8Array) => {
              const b = backend.alloc(bytes.byteLength);
              backend.upload(b, bytes);
              return b;
            };
            const targets = upload(data.targets);
            const run = (fused: boolean) => {
              const logits = upload(data.logits);
              const out = { losses: backend.alloc(4 * rows), lse: backend.alloc(4 * rows), dLogits: inPlace ? logits : backend.alloc(data.logits.byteLength) };
              const common = { logits, targets, lse: out.lse, rows, vocab, dtype };
              if (fused) backend.kernels.crossEntropyForward({ ...common, losses: out.losses, dLogits: out.dLogits, lossScale });
              else {
                backend.kernels.crossEntropyForward({ ...common, losses: out.losses });
                backend.kernels.crossEntropyBackward({ ...common, dLogits: out.dLogits, lossScale });
              }
              return out;
            };
            const read = async (b: ReturnType<typeof run>["lse"]) => {
              const out = new Uint8Array(b.byteLength);
              await backend.download(b, out);
              return out;
            };
            const [fused, twoCalls] = [run(true), run(false)];
            for (const key of ["losses", "lse", "dLogits"] as const) expect(sameBytes(await read(fused[key]), await read(twoCalls[key])), key).toBe(true);
            // The gradient is not the logits: the comparison is of real work.
            expect(sameBytes(await read(fused.dLogits), data.logits)).toBe(false);
          });
        }
      }
    }
  }
});
