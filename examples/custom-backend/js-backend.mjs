import { CONTRACT_VERSION, KERNEL_NAMES, KernelArgumentError, resolveOperand } from "@kiln/contract";

/** A backend in plain JavaScript: buffers are Uint8Arrays, and it runs f32 `add` and `scale`. */
export function createJsBackend() {
  const buffers = new Map();
  let nextId = 1, inUse = 0, peak = 0, allocCalls = 0;
  const bytes = (op, byteLength) => {
    const { buffer, byteOffset } = resolveOperand(op);
    const b = buffers.get(buffer.id);
    if (!b || byteOffset + byteLength > b.byteLength) throw new KernelArgumentError(`buffer ${buffer.id} is freed or too small`);
    return b.subarray(byteOffset, byteOffset + byteLength);
  };
  const f32 = (op, n) => { const b = bytes(op, n * 4); return new Float32Array(b.buffer, b.byteOffset, n); };
  const unsupported = (name) => () => { throw new KernelArgumentError(`the js backend has no ${name}`); };
  const kernels = Object.fromEntries(KERNEL_NAMES.map((name) => [name, unsupported(name)]));
  kernels.add = ({ a, b, out, n }) => { const x = f32(a, n), y = f32(b, n), z = f32(out, n); for (let i = 0; i < n; i++) z[i] = x[i] + y[i]; };
  kernels.scale = ({ x, out, n, alpha }) => { const v = f32(x, n), z = f32(out, n); for (let i = 0; i < n; i++) z[i] = alpha * v[i]; };
  const kernelDTypes = Object.fromEntries(KERNEL_NAMES.map((name) => [name, name === "add" || name === "scale" ? ["f32"] : []]));
  return {
    contractVersion: CONTRACT_VERSION,
    name: "js",
    capabilities: () => ({ device: { name: "plain JavaScript", kind: "cpu", memoryBytes: 2 ** 31, parallelism: 1 }, kernelDTypes, peakFlops: {} }),
    alloc(byteLength) { const id = nextId++; buffers.set(id, new Uint8Array(byteLength)); inUse += byteLength; peak = Math.max(peak, inUse); allocCalls++; return { id, byteLength }; },
    free(buffer) { inUse -= buffer.byteLength; buffers.delete(buffer.id); },
    upload(dst, data) { bytes(dst, data.byteLength).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength)); },
    async download(src, out) { new Uint8Array(out.buffer, out.byteOffset, out.byteLength).set(bytes(src, out.byteLength)); },
    copy(src, dst, byteLength) { bytes(dst, byteLength).set(bytes(src, byteLength)); },
    memoryStats: () => ({ inUseBytes: inUse, peakBytes: peak, totalBytes: 2 ** 31, liveAllocations: buffers.size, allocCalls }),
    resetPeakMemory() { peak = inUse; },
    kernels,
    synchronize: async () => {},
    dispose() { buffers.clear(); },
  };
}
