import { describe } from "vitest";
import { createReferenceBackend } from "@kiln/contract";
import { pytorchParity } from "./support/pytorch-parity.js";

describe("PyTorch parity on the reference backend", () => {
  pytorchParity("gpt2-tiny", () => createReferenceBackend());
  pytorchParity("llama-tiny", () => createReferenceBackend());
  pytorchParity("llama-moe-tiny", () => createReferenceBackend());
  pytorchParity("llama-mla-tiny", () => createReferenceBackend());
  pytorchParity("llama-hybrid-tiny", () => createReferenceBackend());
  pytorchParity("llama-mamba3-tiny", () => createReferenceBackend());
  pytorchParity("llama-mamba3-mimo-tiny", () => createReferenceBackend());
  pytorchParity("llama-lora-tiny", () => createReferenceBackend());
  pytorchParity("gpt2-lora-tiny", () => createReferenceBackend());
});
