import { type Backend, CONTRACT_VERSION, type Capabilities, type Operand, resolveOperand } from "../backend.js";
import { type DType, FLOAT_DTYPES, bytesPerElement } from "../dtype.js";
import { KernelArgumentError } from "../errors.js";
import { decodeElements, encodeToBytes } from "../host-codec.js";
import { KERNEL_NAMES, type KernelArgsMap, type KernelName, type Kernels, kernelSpecs } from "../kernels/index.js";
import type { OperandSpec } from "../kernels/spec.js";
import { oracle } from "../oracle/index.js";
import { HostMemory } from "./host-memory.js";

export interface ReferenceBackendOptions {
  /** Bytes the backend lets you allocate in all (default 8 GiB). */
  memoryBytes?: number;
}

/**
 * The oracle as a Backend: host memory, every kernel run by the f64 reference
 * loops and rounded once to the operand dtype. Slow; for correctness only.
 */
export function createReferenceBackend(options: ReferenceBackendOptions = {}): Backend {
  const memory = new HostMemory(options.memoryBytes ?? 8 * 2 ** 30);
  const kernels = Object.fromEntries(KERNEL_NAMES.map((name) => [name, (args: never) => runOracle(memory, name, args)])) as unknown as Kernels;
  const kernelDTypes = Object.fromEntries(
    KERNEL_NAMES.map((name) => [name, name === "fill" ? (["f32", "bf16", "f16", "i32", "u32", "u16"] as DType[]) : FLOAT_DTYPES]),
  ) as Capabilities["kernelDTypes"];

  return {
    contractVersion: CONTRACT_VERSION,
    name: "reference",
    capabilities: () => ({
      device: { name: "reference oracle (f64 loops)", kind: "reference", memoryBytes: memory.totalBytes, parallelism: 1 },
      kernelDTypes,
      peakFlops: {},
    }),
    alloc: (n) => memory.alloc(n),
    free: (b) => memory.free(b),
    upload(dst, data) {
      memory.view(dst, data.byteLength, "upload").set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    },
    async download(src, out) {
      new Uint8Array(out.buffer, out.byteOffset, out.byteLength).set(memory.view(src, out.byteLength, "download"));
    },
    copy(src, dst, byteLength) {
      const from = memory.view(src, byteLength, "copy source");
      memory.view(dst, byteLength, "copy destination").set(from.slice());
    },
    memoryStats: () => memory.stats(),
    resetPeakMemory: () => memory.resetPeak(),
    kernels,
    synchronize: async () => {},
    dispose: () => memory.clear(),
  };
}

/** The operands present in `args`, with their specs. */
export function presentOperands<K extends KernelName>(name: K, args: KernelArgsMap[K]): { spec: OperandSpec; op: Operand }[] {
  const record = args as unknown as Record<string, Operand | undefined>;
  return kernelSpecs[name]
    .operands(args)
    .filter((s) => record[s.key] !== undefined)
    .map((spec) => ({ spec, op: record[spec.key]! }));
}

function runOracle<K extends KernelName>(memory: HostMemory, name: K, args: KernelArgsMap[K]): void {
  const spec = kernelSpecs[name];
  spec.check(args);
  const operands = presentOperands(name, args);
  for (const s of spec.operands(args)) {
    if (!s.optional && (args as unknown as Record<string, unknown>)[s.key] === undefined) {
      throw new KernelArgumentError(`missing operand ${s.key}`, { where: name });
    }
  }
  checkOverlaps(name, operands, spec.aliases ?? []);
  const values: Record<string, Float64Array> = {};
  const views: Record<string, Uint8Array> = {};
  for (const { spec: s, op } of operands) {
    views[s.key] = memory.view(op, s.elements * bytesPerElement(s.dtype), `${name}.${s.key}`);
    values[s.key] = decodeElements(views[s.key], s.dtype, s.elements);
  }
  const before: Record<string, Float64Array> = {};
  for (const { spec: s } of operands) if (s.role !== "in") before[s.key] = values[s.key].slice();
  oracle[name](args, values);
  // Store only the elements the oracle changed: strided outputs (dQ, dK, dV slices of
  // one packed buffer) interleave, and writing a whole extent back would overwrite a
  // neighbour's fresh values with the stale ones decoded before the call.
  for (const { spec: s } of operands) {
    if (s.role === "in") continue;
    const v = values[s.key], old = before[s.key], width = bytesPerElement(s.dtype);
    const encoded = encodeToBytes(v, s.dtype), view = views[s.key];
    for (let i = 0; i < v.length; i++) {
      if (Object.is(v[i], old[i])) continue;
      for (let b = i * width; b < (i + 1) * width; b++) view[b] = encoded[b];
    }
  }
}

/** Outputs may share memory with another operand only where the kernel allows it. */
function checkOverlaps(name: string, operands: { spec: OperandSpec; op: Operand }[], aliases: readonly (readonly [string, string])[]): void {
  const range = (o: { spec: OperandSpec; op: Operand }) => {
    const r = resolveOperand(o.op);
    return { id: r.buffer.id, lo: r.byteOffset, hi: r.byteOffset + o.spec.elements * bytesPerElement(o.spec.dtype) };
  };
  for (const out of operands.filter((o) => o.spec.role !== "in")) {
    const ro = range(out);
    for (const other of operands) {
      if (other === out || (out.spec.strided && other.spec.strided)) continue;
      const r = range(other);
      const overlap = r.id === ro.id && r.lo < ro.hi && ro.lo < r.hi;
      if (!overlap) continue;
      const allowed = aliases.some(([o, i]) => (o === out.spec.key && i === other.spec.key) || (i === out.spec.key && o === other.spec.key));
      const exact = r.lo === ro.lo && r.hi === ro.hi;
      if (!(allowed && exact)) {
        throw new KernelArgumentError(`${out.spec.key} overlaps ${other.spec.key}`, {
          where: name,
          hint: allowed ? "in-place operands must name exactly the same bytes" : "give the output its own buffer",
        });
      }
    }
  }
}
