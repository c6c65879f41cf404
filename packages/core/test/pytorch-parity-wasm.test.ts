import { describe } from "vitest";
import { createWasmBackend } from "@kiln/kernels-wasm";
import { pytorchParity } from "./support/pytorch-parity.js";

describe.each([1, 2])("PyTorch parity on the wasm backend, %i thread(s)", (threads) => {
  pytorchParity("gpt2-tiny", () => createWasmBackend({ threads, measurePeak: false }));
  pytorchParity("llama-tiny", () => createWasmBackend({ threads, measurePeak: false }));
  pytorchParity("llama-moe-tiny", () => createWasmBackend({ threads, measurePeak: false }));
  pytorchParity("llama-mla-tiny", () => createWasmBackend({ threads, measurePeak: false }));
  pytorchParity("llama-hybrid-tiny", () => createWasmBackend({ threads, measurePeak: false }));
  pytorchParity("llama-mamba3-tiny", () => createWasmBackend({ threads, measurePeak: false }));
  pytorchParity("llama-mamba3-mimo-tiny", () => createWasmBackend({ threads, measurePeak: false }));
  pytorchParity("llama-lora-tiny", () => createWasmBackend({ threads, measurePeak: false }));
  pytorchParity("gpt2-lora-tiny", () => createWasmBackend({ threads, measurePeak: false }));
});
