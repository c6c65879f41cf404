// What require("@kiln/kernels-wasm") gets: the package is an ES module only.
throw new Error(
  "@kiln/kernels-wasm is an ES module and cannot be loaded with require(). " +
    'Use import { createKernels } from "@kiln/kernels-wasm" in an ES module (.mjs, or "type": "module"), ' +
    'or const { createKernels } = await import("@kiln/kernels-wasm") from CommonJS.',
);
