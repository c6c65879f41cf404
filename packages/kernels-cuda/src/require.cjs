// What require("@kiln/kernels-cuda") gets: the package is an ES module only.
throw new Error(
  "@kiln/kernels-cuda is an ES module and cannot be loaded with require(). " +
    'Use import { cudaStatus, createCudaBackend } from "@kiln/kernels-cuda" in an ES module (.mjs, or "type": "module"), ' +
    'or const { createCudaBackend } = await import("@kiln/kernels-cuda") from CommonJS.',
);
