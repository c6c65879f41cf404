import { defineConfig } from "vite";

// Cross-origin isolation (SharedArrayBuffer, so training gets every core) for `vite` and `vite preview`.
const headers = { "Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp" };

export default defineConfig({
  base: "./",
  worker: { format: "es" },
  server: { headers, fs: { allow: ["../.."] } },
  preview: { headers },
  build: { target: "es2022", chunkSizeWarningLimit: 4096 },
});
