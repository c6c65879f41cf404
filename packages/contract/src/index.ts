export * from "./backend.js";
export * from "./dtype.js";
export * from "./errors.js";
export * from "./half.js";
export * from "./host-codec.js";
export * from "./kernels/index.js";
export * from "./operand-ranges.js";
export { oracle, type OracleKernel, gelu, geluGrad, silu, siluGrad, sigmoid } from "./oracle/index.js";
export { createReferenceBackend, type ReferenceBackendOptions } from "./reference/reference-backend.js";
