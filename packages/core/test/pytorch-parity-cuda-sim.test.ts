import { describe, it } from "vitest";
import { createCudaSimBackend, cudaStatus } from "@kiln/kernels-cuda";
import { pytorchParity } from "./support/pytorch-parity.js";

// The CUDA kernels, compiled for the host by the simulator, against the PyTorch fixtures.
const sim = cudaStatus().simulator;
if (!sim.built) {
  it.skip(`PyTorch parity on cuda-sim: ${sim.detail}`, () => {});
} else {
  describe("PyTorch parity on the CUDA kernels (cuda-sim)", () => {
    pytorchParity("gpt2-tiny", () => createCudaSimBackend());
    pytorchParity("llama-tiny", () => createCudaSimBackend());
    pytorchParity("llama-moe-tiny", () => createCudaSimBackend());
    pytorchParity("llama-mla-tiny", () => createCudaSimBackend());
    pytorchParity("llama-hybrid-tiny", () => createCudaSimBackend());
    pytorchParity("llama-mamba3-tiny", () => createCudaSimBackend());
    pytorchParity("llama-mamba3-mimo-tiny", () => createCudaSimBackend());
    pytorchParity("llama-lora-tiny", () => createCudaSimBackend());
    pytorchParity("gpt2-lora-tiny", () => createCudaSimBackend());
  });
}
