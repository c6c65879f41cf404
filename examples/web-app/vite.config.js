// Cross-origin isolation (SharedArrayBuffer, so the kernels get threads) for `vite` and `vite preview`.
const headers = { "Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp" };

export default {
  server: { headers },
  preview: { headers },
};
