import fs from "node:fs";
import { addonPath, loadAddon } from "./native-addon.js";
import { type NcclLibraryStatus, ncclLibraryStatus } from "./nccl.js";
import { findSharedLibrary } from "./shared-library.js";

export interface CudaStatus {
  /** The NVIDIA kernel driver, from /proc/driver/nvidia/version and libcuda. */
  driver: { found: boolean; version?: string; library?: string; detail: string };
  /** Whether this package's native addon (the CUDA kernels) was built, and for which compute capabilities. */
  addon: { built: boolean; archs: string[]; detail: string };
  /** What the addon's CUDA runtime sees (deviceCount 0 and an error when the addon is not built). */
  runtime: { deviceCount: number; driverVersion: number; runtimeVersion: number; error: string };
  /** The same kernels compiled for the host CPU (KILN_BACKEND=cuda-sim). */
  simulator: { built: boolean; detail: string };
  /** Libraries loaded at run time when present; kiln works without them where it can. */
  libraries: { cublas: string | null; cublasLt: string | null; nccl: string | null };
  /**
   * Versions of the optional libraries found, read from the libraries themselves ("13.0.2"), or why not;
   * an NCCL that kiln cannot use says so after its version ("2.9.0 (not usable: ...)").
   */
  libraryVersions: { cublasLt?: string; nccl?: string };
  /** Whether NCCL's collectives (several GPUs) can run: the same answer as ncclLibraryStatus(). */
  nccl: NcclLibraryStatus;
}

const PROC_VERSION = "/proc/driver/nvidia/version";

function driverStatus(): CudaStatus["driver"] {
  const library = findSharedLibrary(["libcuda.so.1", "libcuda.so"]) ?? undefined;
  let version: string | undefined;
  try {
    const text = fs.readFileSync(PROC_VERSION, "utf8");
    version = /Kernel Module\s+(?:for \S+\s+)?([\d.]+)/.exec(text)?.[1] ?? text.split("\n")[0].trim();
  } catch {
    // no kernel module loaded
  }
  if (version && library) return { found: true, version, library, detail: `driver ${version} (${library})` };
  if (library) return { found: false, library, detail: `${library} is installed but no NVIDIA kernel module is loaded (${PROC_VERSION} missing)` };
  if (version) return { found: false, version, detail: `kernel module ${version} is loaded but libcuda.so.1 was not found; install the NVIDIA driver's user-space libraries` };
  return { found: false, detail: `no NVIDIA driver (${PROC_VERSION} missing, libcuda.so.1 not found)` };
}

function addonStatus(): Pick<CudaStatus, "addon" | "runtime"> {
  const { addon, reason } = loadAddon("cuda");
  if (!addon) {
    return {
      addon: { built: false, archs: [], detail: reason ?? "not built" },
      runtime: { deviceCount: 0, driverVersion: 0, runtimeVersion: 0, error: "the CUDA kernels are not built" },
    };
  }
  const st = addon.status();
  const archs = st.archs.split(",").filter(Boolean);
  return {
    addon: { built: true, archs, detail: `${addonPath("cuda")} (sm_${archs.join(", sm_")})` },
    runtime: { deviceCount: st.deviceCount, driverVersion: st.driverVersion, runtimeVersion: st.runtimeVersion, error: st.error },
  };
}

function simulatorStatus(): CudaStatus["simulator"] {
  const { addon, reason } = loadAddon("sim");
  return addon ? { built: true, detail: addonPath("sim") } : { built: false, detail: reason ?? "not built" };
}

/** What this machine offers for the GPU backend, found by loading the addon (which needs no driver to load). */
export function cudaStatus(): CudaStatus {
  const libraries = {
    cublas: findSharedLibrary(["libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"]),
    cublasLt: findSharedLibrary(["libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so"]),
    nccl: ncclFile(),
  };
  const nccl = ncclLibraryStatus();
  if (nccl.found) libraries.nccl = nccl.path;
  return {
    driver: driverStatus(),
    ...addonStatus(),
    simulator: simulatorStatus(),
    libraries,
    libraryVersions: {
      ...(libraries.cublasLt ? { cublasLt: libraryVersion(libraries.cublasLt, "cublasLt") } : {}),
      ...(libraries.nccl ? { nccl: nccl.found ? nccl.version : unusableNccl(libraries.nccl, nccl.problem) } : {}),
    },
    nccl,
  };
}

/** The NCCL file there is: KILN_NCCL_LIBRARY when it names one, else where the loader would find libnccl.so.2. */
function ncclFile(): string | null {
  const wanted = process.env.KILN_NCCL_LIBRARY;
  if (wanted) return fs.existsSync(wanted) ? wanted : null;
  return findSharedLibrary(["libnccl.so.2", "libnccl.so"]);
}

/** The version of an NCCL file kiln cannot use, and why not. */
function unusableNccl(file: string, problem: string): string {
  const version = libraryVersion(file, "nccl");
  return `${version.startsWith("version unknown") ? "version unknown" : version} (not usable: ${problem})`;
}

/** Read through either addon (the probe needs no GPU); an explanation when neither is built or the read fails. */
function libraryVersion(file: string, kind: "cublasLt" | "nccl"): string {
  const addon = loadAddon("cuda").addon ?? loadAddon("sim").addon;
  if (!addon) return "version unknown (the CUDA addon is not built)";
  try {
    return addon.libraryVersion(file, kind);
  } catch (err) {
    return `version unknown (${(err as Error).message})`;
  }
}
