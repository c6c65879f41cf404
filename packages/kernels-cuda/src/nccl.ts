// NCCL collectives on a CUDA backend's device buffers (data-parallel training on
// several GPUs). NCCL is loaded at run time by the addon (csrc/comm/): kiln never
// links against it, and a machine without it reports what is missing.
import { type Backend, DeviceError, type FloatDType, FLOAT_DTYPES, KernelArgumentError, type Operand, bytesPerElement } from "@kiln/contract";
import { nativeBackendParts } from "./cuda-backend.js";
import type { DeviceMemory } from "./device-memory.js";
import { dtypeCode } from "./kernel-call.js";
import { type NativeAddon, type NativeNccl, loadAddon } from "./native-addon.js";
import { findSharedLibrary } from "./shared-library.js";

/** Whether a usable NCCL (2.10 or newer, with every function kiln calls) is found, and where; else what is wrong and what to do. */
export type NcclLibraryStatus = { found: true; path: string; version: string } | { found: false; problem: string; hint: string };

/** One rank's collectives over NCCL, on device buffers of the backend it was opened on. */
export interface NcclCollectives {
  readonly rank: number;
  readonly worldSize: number;
  /**
   * In place: every rank's `n` elements at `at` become their sum (or mean) over the
   * ranks. Ordered after the kernels enqueued before the call, and before those
   * enqueued after it; resolves once done on the device.
   */
  allReduce(at: Operand, n: number, dtype: FloatDType, op: "sum" | "mean"): Promise<void>;
  /** In place: `bytes` bytes at `at` on every rank become rank `root`'s. Ordered like allReduce. */
  broadcast(at: Operand, bytes: number, root: number): Promise<void>;
  /**
   * In place: the `worldSize * n` elements at `at` are worldSize chunks of `n`; this
   * rank's chunk (number `rank`) becomes the sum (or mean) over the ranks of their
   * chunk `rank`; only that chunk holds a result afterwards. Ordered like allReduce.
   */
  reduceScatter(at: Operand, n: number, dtype: FloatDType, op: "sum" | "mean"): Promise<void>;
  /**
   * In place: the `worldSize * bytes` bytes at `at` are worldSize chunks; chunk r on
   * every rank becomes rank r's chunk r. Ordered like allReduce.
   */
  allGather(at: Operand, bytes: number): Promise<void>;
  /** Releases the communicator (aborting collectives still in flight); later calls fail. */
  close(): void;
}

export interface NcclCollectivesOptions {
  /** ncclUniqueId() of rank 0, handed to every rank (kiln's rendezvous carries it). */
  uniqueId: Uint8Array;
  rank: number;
  worldSize: number;
  /**
   * How long joining, and each collective, may take before the communicator is
   * aborted and the call rejects (default 10 minutes).
   */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 10 * 60_000;
const MINIMUM = "2.10";
const INSTALL =
  `install NCCL ${MINIMUM} or newer (pip install nvidia-nccl-cu13, or nvidia-nccl-cu12 for CUDA 12, puts it in site-packages/nvidia/nccl/lib) ` +
  "and add the folder holding libnccl.so.2 to LD_LIBRARY_PATH, or set KILN_NCCL_LIBRARY to the file";

/** The file to load: KILN_NCCL_LIBRARY, else libnccl.so.2 where the loader would find it, else the bare name (dlopen searches). */
function libraryToLoad(): { path: string; fromEnv: boolean } {
  const wanted = process.env.KILN_NCCL_LIBRARY;
  if (wanted) return { path: wanted, fromEnv: true };
  return { path: findSharedLibrary(["libnccl.so.2"]) ?? "libnccl.so.2", fromEnv: false };
}

function probeAddon(): { addon?: NativeAddon; reason?: string } {
  const cuda = loadAddon("cuda");
  if (cuda.addon?.ncclLibrary) return cuda;
  const sim = loadAddon("sim");
  if (sim.addon?.ncclLibrary) return sim;
  return { reason: cuda.reason ?? "this build of the CUDA addon cannot load NCCL" };
}

function hintFor(code: string | undefined, fromEnv: boolean): string {
  const file = fromEnv ? "the file KILN_NCCL_LIBRARY names" : "the libnccl.so.2 found";
  if (code === "KILN_NCCL_TOO_OLD") return `${INSTALL}; unset KILN_NCCL_LIBRARY or point it at the newer one if it names the old one`;
  if (code === "KILN_NCCL_SYMBOL") return `${file} is not a complete NCCL: ${INSTALL}`;
  return INSTALL;
}

/** What NCCL this machine has for kiln's collectives; never throws. Needs the CUDA addon or the simulator built, not a GPU. */
export function ncclLibraryStatus(): NcclLibraryStatus {
  const { addon, reason } = probeAddon();
  if (!addon) {
    return { found: false, problem: `cannot look for NCCL: ${reason}`, hint: "build the CUDA kernels with 'pnpm --filter @kiln/kernels-cuda build'" };
  }
  const lib = libraryToLoad();
  try {
    return { found: true, ...addon.ncclLibrary!(lib.path) };
  } catch (err) {
    const e = err as Error & { code?: string };
    const problem = lib.fromEnv ? `KILN_NCCL_LIBRARY=${lib.path}: ${e.message}` : e.message;
    return { found: false, problem, hint: hintFor(e.code, lib.fromEnv) };
  }
}

function requireNccl(): { addon: NativeAddon; path: string } {
  const status = ncclLibraryStatus();
  if (!status.found) throw new DeviceError(`NCCL is not usable: ${status.problem}`, { where: "NCCL (libnccl.so.2)", hint: status.hint });
  return { addon: probeAddon().addon!, path: status.path };
}

/** A new NCCL unique id (128 bytes): made by rank 0 and handed to every rank. Throws a DeviceError when NCCL is not usable. */
export function ncclUniqueId(): Uint8Array {
  const { addon, path } = requireNccl();
  return addon.ncclUniqueId!(path);
}

/** A native rejection as a DeviceError saying what to do. */
function ncclError(err: unknown, where: string): Error {
  const e = err as Error & { code?: string };
  if (err instanceof DeviceError || err instanceof KernelArgumentError) return e;
  const hint =
    e.code === "KILN_NCCL_TIMEOUT"
      ? "check that every rank is alive and issues the same collectives in the same order; raise timeoutMs if a step legitimately takes longer"
      : "NCCL_DEBUG=WARN makes NCCL print its own account of the failure";
  return new DeviceError(e.message, { where, hint });
}

function checkInteger(value: number, what: string, min: number, max = Number.MAX_SAFE_INTEGER): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new KernelArgumentError(`${what} must be an integer between ${min} and ${max}, got ${value}`, { where: "openNcclCollectives" });
  }
}

/**
 * Joins the NCCL communicator `uniqueId` as `rank` of `worldSize` on the device of
 * `backend` (made by createCudaBackend or createCudaSimBackend). Resolves once every
 * rank has joined; rejects with a DeviceError when NCCL is missing, too old, fails,
 * or the ranks do not all join within timeoutMs.
 */
export async function openNcclCollectives(backend: Backend, options: NcclCollectivesOptions): Promise<NcclCollectives> {
  const parts = nativeBackendParts(backend);
  if (!parts) {
    throw new DeviceError(`NCCL collectives need a backend made by @kiln/kernels-cuda, not ${backend.name}`, {
      where: "openNcclCollectives",
      hint: "open the backend with createCudaBackend() (or createCudaSimBackend() in tests)",
    });
  }
  const { uniqueId, rank, worldSize } = options;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!(uniqueId instanceof Uint8Array) || uniqueId.length !== 128) {
    throw new KernelArgumentError("uniqueId must be the 128 bytes ncclUniqueId() returned on rank 0", { where: "openNcclCollectives" });
  }
  checkInteger(worldSize, "worldSize", 1);
  checkInteger(rank, "rank", 0, worldSize - 1);
  if (!(timeoutMs > 0 && Number.isFinite(timeoutMs))) {
    throw new KernelArgumentError(`timeoutMs must be a positive number of milliseconds, got ${timeoutMs}`, { where: "openNcclCollectives" });
  }
  const { path } = requireNccl();
  if (!parts.device.openNccl) throw new DeviceError("this build of the CUDA addon cannot call NCCL", { where: "openNcclCollectives", hint: "rebuild it with 'pnpm --filter @kiln/kernels-cuda build'" });
  const where = `NCCL rank ${rank} of ${worldSize}`;
  let joining: Promise<NativeNccl>;
  try {
    joining = parts.device.openNccl(path, uniqueId, rank, worldSize, timeoutMs);
  } catch (err) {
    throw ncclError(err, where);
  }
  const native = await joinWithin(joining, timeoutMs, where);
  return collectives(native, parts.memory, rank, worldSize, where);
}

/**
 * ncclCommInitRank blocks (on a worker thread) until every rank joins and cannot be
 * interrupted: past the timeout the promise rejects, and a communicator that still
 * forms later is closed at once.
 */
function joinWithin(joining: Promise<NativeNccl>, timeoutMs: number, where: string): Promise<NativeNccl> {
  return new Promise((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(
        new DeviceError(`${where}: joining the communicator did not complete within ${timeoutMs} ms`, {
          where,
          hint: "start every rank with the same unique id and world size, and check that each one reached this point",
        }),
      );
    }, timeoutMs);
    joining.then(
      (native) => {
        clearTimeout(timer);
        if (late) native.close();
        else resolve(native);
      },
      (err: unknown) => {
        clearTimeout(timer);
        if (!late) reject(ncclError(err, where));
      },
    );
  });
}

function collectives(native: NativeNccl, memory: DeviceMemory, rank: number, worldSize: number, where: string): NcclCollectives {
  let closed = false;
  const open = (what: string) => {
    if (closed) throw new DeviceError(`${what} on a closed NCCL communicator`, { where, hint: "open a new one with openNcclCollectives" });
  };
  return {
    rank,
    worldSize,
    // async: every failure is a rejection; the collective is still enqueued during the call itself.
    async allReduce(at, n, dtype, op) {
      open("allReduce");
      checkInteger(n, "allReduce's element count", 0);
      if (!FLOAT_DTYPES.includes(dtype)) throw new KernelArgumentError(`allReduce takes f32, bf16 or f16, not ${dtype}`, { where: "allReduce" });
      if (op !== "sum" && op !== "mean") throw new KernelArgumentError(`allReduce's op is "sum" or "mean", not ${String(op)}`, { where: "allReduce" });
      const address = memory.address(at, n * bytesPerElement(dtype), "allReduce");
      if (n === 0) return;
      try {
        await native.allReduce(address, n, dtypeCode(dtype), op === "mean");
      } catch (err) {
        throw ncclError(err, where);
      }
    },
    async broadcast(at, bytes, root) {
      open("broadcast");
      checkInteger(bytes, "broadcast's byte count", 0);
      checkInteger(root, "broadcast's root", 0, worldSize - 1);
      const address = memory.address(at, bytes, "broadcast");
      if (bytes === 0) return;
      try {
        await native.broadcast(address, bytes, root);
      } catch (err) {
        throw ncclError(err, where);
      }
    },
    async reduceScatter(at, n, dtype, op) {
      open("reduceScatter");
      checkInteger(n, "reduceScatter's element count (per rank)", 0);
      if (!FLOAT_DTYPES.includes(dtype)) throw new KernelArgumentError(`reduceScatter takes f32, bf16 or f16, not ${dtype}`, { where: "reduceScatter" });
      if (op !== "sum" && op !== "mean") throw new KernelArgumentError(`reduceScatter's op is "sum" or "mean", not ${String(op)}`, { where: "reduceScatter" });
      const address = memory.address(at, worldSize * n * bytesPerElement(dtype), `reduceScatter of ${worldSize} x ${n} ${dtype}`);
      if (n === 0) return;
      try {
        await native.reduceScatter(address, n, dtypeCode(dtype), op === "mean");
      } catch (err) {
        throw ncclError(err, where);
      }
    },
    async allGather(at, bytes) {
      open("allGather");
      checkInteger(bytes, "allGather's byte count (per rank)", 0);
      const address = memory.address(at, worldSize * bytes, `allGather of ${worldSize} x ${bytes} bytes`);
      if (bytes === 0) return;
      try {
        await native.allGather(address, bytes);
      } catch (err) {
        throw ncclError(err, where);
      }
    },
    close() {
      if (closed) return;
      closed = true;
      native.close();
    },
  };
}
