import { type Asset, fileAsset, type Routes } from "./static-server.js";
import type { Bundles } from "./bundle.js";

const PAGE = `<!doctype html>
<meta charset="utf-8">
<title>kiln kernels-wasm conformance</title>
<script type="module" src="/app/page.js"></script>
`;

const packageRoot = new URL("../../", import.meta.url);

/**
 * The page's files, laid out as the package expects relative to its code:
 * the bundles and the worker's source files in /app/, the kernel modules in /build/.
 */
export function kernelPageRoutes(bundles: Bundles): Routes {
  return async (path: string): Promise<Asset | undefined> => {
    if (path === "/" || path === "/index.html") return { body: PAGE, type: "text/html; charset=utf-8" };
    const worker = /^\/app\/(thread-worker-(?:browser|loop)\.js|spin-wait\.js)$/.exec(path);
    if (worker) return fileAsset(new URL(`src/${worker[1]}`, packageRoot), "text/javascript");
    const bundled = path.startsWith("/app/") ? bundles.get(path.slice("/app/".length)) : undefined;
    if (bundled !== undefined) return { body: bundled, type: "text/javascript" };
    const wasm = /^\/build\/(kernels-[a-z]+-[a-z]+\.wasm)$/.exec(path);
    if (wasm) return fileAsset(new URL(`build/${wasm[1]}`, packageRoot), "application/wasm").catch(() => undefined);
    return undefined;
  };
}
