import { nativeRouting } from "./native-routing.js";

/** The activations that run natively: they read the WebAssembly kernel's ActivationArgs block as it is. */
export const nativeActivations = nativeRouting("gelu", {
  kiln_gelu_forward: "kiln_native_gelu_forward",
  kiln_gelu_backward: "kiln_native_gelu_backward",
});
