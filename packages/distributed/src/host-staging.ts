import type { Backend, Operand } from "@kiln/contract";

/** `bytes` bytes of the backend's memory at `at`, downloaded into a fresh host buffer (the host-staged sync backends' first step). */
export async function downloadToHost(backend: Backend, at: Operand, bytes: number): Promise<Uint8Array> {
  const host = new Uint8Array(bytes);
  await backend.download(at, host);
  return host;
}
