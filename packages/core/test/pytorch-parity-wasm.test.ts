import { describe } from "vitest";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { pytorchParity } from "./support/pytorch-parity.js";

// On 1 and 2 threads, with the native kernels (where this machine has them; Node's default)
// and with WebAssembly alone (as in a browser, or KILN_NATIVE=0).
const setups = [1, 2].flatMap((threads) => [true, false].map((native) => ({ threads, native, kernels: native ? "native kernels where built" : "WebAssembly alone" })));

describe.each(setups)("PyTorch parity on the wasm backend, $threads thread(s), $kernels", ({ threads, native }) => {
  const backend = () => createWasmBackend({ threads, native, measurePeak: false });
  for (const fixture of [
    "gpt2-tiny",
    "llama-tiny",
    "llama-moe-tiny",
    "llama-mla-tiny",
    "llama-hybrid-tiny",
    "llama-mamba3-tiny",
    "llama-mamba3-mimo-tiny",
    "llama-lora-tiny",
    "gpt2-lora-tiny",
  ]) {
    pytorchParity(fixture, backend);
  }
});
