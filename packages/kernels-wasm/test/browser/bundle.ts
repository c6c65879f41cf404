import { build } from "esbuild";
import { fileURLToPath } from "node:url";

/** Bundled entry points by output file name (e.g. "page.js"). */
export type Bundles = Map<string, string>;

/**
 * Bundles the page and its conformance Worker from TypeScript sources (the
 * "@kiln/source" condition, as the tests resolve them) into browser ES modules.
 * `import.meta.url` is kept, so the package finds thread-worker-browser.js next
 * to the bundle and its .wasm files in ../build/, as it does next to src/. The
 * browser condition picks platform-browser.ts: no node: import to externalize.
 */
export async function bundleBrowserEntries(): Promise<Bundles> {
  const entry = (name: string) => fileURLToPath(new URL(`./${name}.ts`, import.meta.url));
  const result = await build({
    entryPoints: { page: entry("page-entry"), "conformance-worker": entry("conformance-worker") },
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    conditions: ["@kiln/source"],
    outdir: "/bundle",
    write: false,
    logLevel: "silent",
  });
  return new Map(result.outputFiles.map((f) => [f.path.slice("/bundle/".length), f.text]));
}
