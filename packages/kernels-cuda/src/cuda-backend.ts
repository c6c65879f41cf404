import {
  ALL_DTYPES,
  type Backend,
  CONTRACT_VERSION,
  type Capabilities,
  DeviceError,
  FLOAT_DTYPES,
  KERNEL_NAMES,
  KernelArgumentError,
  type KernelArgsMap,
  type KernelName,
  type KernelSpec,
  type Kernels,
  kernelOperandRanges,
  kernelSpecs,
} from "@kiln/contract";
import { DeviceMemory } from "./device-memory.js";
import { gpuPeakFlops } from "./gpu-peaks.js";
import { kernelCallValues } from "./kernel-call.js";
import type { AddonKind, NativeAddon, NativeDevice } from "./native-addon.js";

export interface OpenDeviceOptions {
  /** Device ordinal among the visible devices (CUDA_VISIBLE_DEVICES applies). */
  device: number;
  /** Registry name of the backend: "cuda" or "cuda-sim". */
  name: string;
  kind: AddonKind;
  /** cuBLASLt to run matmuls through (the real addon only); `required` makes a load failure an error. */
  cublasLt?: { path: string; tf32: boolean; required: boolean };
  /**
   * Called before each kernel launch. The simulator's options are one setting per
   * process, so each simulator backend sets its own here before each of its launches.
   */
  beforeLaunch?: () => void;
}

/** Loads cuBLASLt into the device; says what matmuls run on. A failure is an error only when it was asked for by name. */
function openCublasLt(device: NativeDevice, lib: NonNullable<OpenDeviceOptions["cublasLt"]>): string {
  try {
    if (!device.useCublasLt) throw new Error("this build of the addon cannot call cuBLASLt");
    return `matmul: cuBLASLt ${device.useCublasLt(lib.path, lib.tf32)}${lib.tf32 ? " with TF32 for f32" : ""}`;
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    if (lib.required) {
      device.close();
      throw new DeviceError(`cannot use cuBLASLt: ${why}`, { where: "KILN_MATMUL_PATH=cublaslt", hint: "install cuBLAS 12 or 13 (libcublasLt.so) where the loader finds it, or unset KILN_MATMUL_PATH to use kiln's matmul kernels" });
    }
    return `matmul: kiln's kernels (cuBLASLt at ${lib.path} could not be used: ${why})`;
  }
}

function bytesOf(data: ArrayBufferView): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** The native device and buffer table behind a Backend made here (for NCCL, which works on its device addresses). */
export interface NativeBackendParts {
  device: NativeDevice;
  memory: DeviceMemory;
  kind: AddonKind;
}

const partsOf = new WeakMap<Backend, NativeBackendParts>();

/** The native parts of a backend made by openNativeBackend, or undefined for any other backend. */
export function nativeBackendParts(backend: Backend): NativeBackendParts | undefined {
  return partsOf.get(backend);
}

/**
 * The contract's Backend over a native device (the CUDA addon or its simulator):
 * kernels are checked and bounds-checked here, then enqueued on the device's one
 * stream; download() and synchronize() resolve when the device is done.
 */
export function openNativeBackend(addon: NativeAddon, options: OpenDeviceOptions): Backend {
  const device = new addon.Device(options.device);
  const props = device.properties();
  const libraries = options.cublasLt ? openCublasLt(device, options.cublasLt) : undefined;
  const memory = new DeviceMemory(device);
  const registered = new Set(addon.status().kernels);
  let disposed = false;

  const kernelDTypes = Object.fromEntries(
    KERNEL_NAMES.map((name) => [name, registered.has(name) ? (name === "fill" ? ALL_DTYPES : FLOAT_DTYPES) : []]),
  ) as unknown as Capabilities["kernelDTypes"];

  const resolve = (op: Parameters<DeviceMemory["address"]>[0], bytes: number, what: string) => memory.address(op, bytes, what);
  /** What the addon's launch() reads for this call, after the contract's checks and the operands' bounds checks. */
  const checkedValues = (name: KernelName, args: KernelArgsMap[KernelName]): Float64Array => {
    if (!registered.has(name)) {
      throw new DeviceError(`kernel ${name} is not part of this build of the CUDA kernels`, {
        where: `@kiln/kernels-cuda ${name}`,
        hint: "capabilities().kernelDTypes lists the kernels this backend runs",
      });
    }
    const spec = kernelSpecs[name] as KernelSpec<unknown>;
    spec.check(args);
    return kernelCallValues(name, args as never, kernelOperandRanges(spec, args, resolve));
  };
  const kernels = Object.fromEntries(
    KERNEL_NAMES.map((name) => [
      name,
      (args: KernelArgsMap[KernelName]) => {
        const values = checkedValues(name, args);
        options.beforeLaunch?.();
        device.launch(name, values);
      },
    ]),
  ) as unknown as Kernels;

  const gpu = options.kind === "cuda";
  const backend: Backend = {
    contractVersion: CONTRACT_VERSION,
    name: options.name,
    capabilities: () => ({
      device: {
        name: props.name,
        kind: gpu ? "gpu" : "cpu",
        memoryBytes: props.totalBytes,
        parallelism: props.multiprocessors,
        computeCapability: props.computeCapability,
        ...(libraries ? { libraries } : {}),
      },
      kernelDTypes,
      peakFlops: gpu ? gpuPeakFlops(props.name) ?? {} : {},
    }),
    alloc: (byteLength) => memory.alloc(byteLength),
    free: (buffer) => memory.free(buffer),
    upload(dst, data) {
      device.upload(memory.address(dst, data.byteLength, "upload"), bytesOf(data));
    },
    download(src, out) {
      return device.download(memory.address(src, out.byteLength, "download"), bytesOf(out));
    },
    copy(src, dst, byteLength) {
      const from = memory.address(src, byteLength, "copy source");
      const to = memory.address(dst, byteLength, "copy destination");
      if (from < to + byteLength && to < from + byteLength && byteLength > 0) {
        throw new KernelArgumentError("copy regions overlap", { where: "copy", hint: "copy through a separate buffer" });
      }
      device.copy(to, from, byteLength);
    },
    memoryStats: () => memory.stats(props.totalBytes),
    resetPeakMemory: () => memory.resetPeak(),
    kernels,
    prepare(name, args) {
      const values = checkedValues(name, args as KernelArgsMap[KernelName]);
      memory.reserveScratchFor(name, values);
      const before = options.beforeLaunch;
      return before
        ? () => {
            before();
            device.launch(name, values);
          }
        : () => device.launch(name, values);
    },
    reserveScratch(name, args) {
      memory.reserveScratchFor(name, checkedValues(name, args as KernelArgsMap[KernelName]));
    },
    synchronize: () => device.synchronize(),
    timer: {
      mark: () => device.mark(),
      read: () => device.readMarks(),
    },
    graphs: {
      begin: () => device.beginGraph(),
      end: () => ({ id: device.endGraph() }),
      launch: (graph) => device.launchGraph(graph.id),
      release: (graph) => device.dropGraph(graph.id),
    },
    dispose() {
      if (disposed) return;
      disposed = true;
      memory.clear();
      device.close();
    },
  };
  partsOf.set(backend, { device, memory, kind: options.kind });
  return backend;
}
