/** What the test asks the page to run: kernels are filtered further by what the backend declares. */
export interface RunRequest {
  /** Where the kernels are created: a module Worker of the page, or the page's main thread. */
  on: "worker" | "main";
  threads: number;
  /** Only these kernels (of those declared); all declared kernels when absent. */
  kernels?: readonly string[];
  /** Passed to the backend; 0 makes every call use every thread. */
  minFlopsPerThread?: number;
}

export interface FailedCase {
  name: string;
  details: string[];
}

/** What one conformance run in the page saw and did. */
export interface RunReport {
  /** crossOriginIsolated in the page, and where the kernels ran. */
  pageIsolated: boolean;
  runIsolated: boolean;
  ranOn: RunRequest["on"];
  /** The backend's capabilities().device. */
  device: { name: string; parallelism: number; simd?: string };
  /** The kernel runtime's own view: build variant, memory, and why it uses fewer threads. */
  runtime: { simd: string; threads: number; sharedMemory: boolean; threadLimitReason?: string };
  /** Kernels the backend declares (non-empty kernelDTypes). */
  declaredKernels: string[];
  /** Passed cases per kernel. */
  passedByKernel: Record<string, number>;
  passed: number;
  skipped: number;
  failed: FailedCase[];
  ms: number;
}
