import { readFile } from "node:fs/promises";
import path from "node:path";
import type { Routes } from "./static-server.js";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript",
  ".wasm": "application/wasm",
};

/** A built app's folder as routes: "/" is index.html; anything else missing is a 404. */
export function folderRoutes(root: string): Routes {
  return async (urlPath) => {
    const file = path.join(root, urlPath === "/" ? "index.html" : decodeURIComponent(urlPath));
    if (!file.startsWith(root)) return undefined;
    try {
      return { body: new Uint8Array(await readFile(file)), type: TYPES[path.extname(file)] ?? "application/octet-stream" };
    } catch {
      return undefined;
    }
  };
}
