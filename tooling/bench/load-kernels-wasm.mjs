// The built @kiln/kernels-wasm, or a message saying how to build it.
export async function loadKernelsWasm() {
  const url = new URL("../../packages/kernels-wasm/dist/index.js", import.meta.url);
  return import(url.href).catch((cause) => {
    console.error('bench: @kiln/kernels-wasm is not built; run `pnpm --filter "@kiln/kernels-wasm..." build` first (builds @kiln/contract too)');
    throw cause;
  });
}
