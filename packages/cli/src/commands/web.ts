import { existsSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { ConfigError } from "@kiln/contract";
import { nonNegativeInt } from "./parse-flags.js";

interface WebFlags {
  dir?: string;
  host: string;
  port: number;
}

/**
 * What makes a page cross-origin isolated: SharedArrayBuffer, so the page's kernels get
 * every core. Any static host serving the page needs the first two on every response.
 */
export const ISOLATION_HEADERS = {
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Embedder-Policy": "require-corp",
  "Cross-Origin-Resource-Policy": "same-origin",
} as const;

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".wasm": "application/wasm",
  ".png": "image/png",
  ".svg": "image/svg+xml",
  ".json": "application/json",
};

/** The built page: packages/web/dist beside the CLI in the kiln repository. */
function defaultSiteDir(): string {
  // From src/commands/ or dist/commands/ of packages/cli alike.
  return fileURLToPath(new URL("../../../web/dist/", import.meta.url));
}

/** Serves `root` (a built static site) with the isolation headers; resolves with its URL and a close function. */
export async function serveSite(root: string, host: string, port: number): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    let urlPath: string;
    try {
      urlPath = decodeURIComponent(new URL(req.url ?? "/", "http://localhost").pathname);
    } catch {
      res.writeHead(400, { "Content-Type": "text/plain" }).end("bad request path\n");
      return;
    }
    const file = path.join(root, urlPath.endsWith("/") ? `${urlPath}index.html` : urlPath);
    if (!file.startsWith(root + path.sep) || (req.method !== "GET" && req.method !== "HEAD")) {
      res.writeHead(404, { "Content-Type": "text/plain" }).end("not found\n");
      return;
    }
    readFile(file).then(
      (body) => {
        res.writeHead(200, { "Content-Type": TYPES[path.extname(file)] ?? "application/octet-stream", "Cache-Control": "no-cache", ...ISOLATION_HEADERS });
        res.end(req.method === "HEAD" ? undefined : body);
      },
      () => res.writeHead(404, { "Content-Type": "text/plain", ...ISOLATION_HEADERS }).end(`not found: ${urlPath}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const shown = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${shown}:${address.port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function registerWeb(program: Command): void {
  program
    .command("web")
    .description("serve the page that trains and samples models in a browser tab (cross-origin isolated, so it trains on every core)")
    .option("--dir <folder>", "the built page (default: packages/web/dist of this kiln checkout)")
    .option("--host <address>", "address to listen on (another than 127.0.0.1 opens the page to the network)", "127.0.0.1")
    .option("--port <n>", "port to listen on (0 picks a free one)", nonNegativeInt, 5180)
    .action(async (flags: WebFlags) => {
      const root = path.resolve(flags.dir ?? defaultSiteDir());
      if (!existsSync(path.join(root, "index.html")) || !statSync(root).isDirectory()) {
        throw new ConfigError(`${root} holds no built page (index.html)`, {
          where: flags.dir ? "--dir" : "packages/web",
          hint: "build it with pnpm --filter @kiln/web build, or pass --dir with the folder of a built page",
        });
      }
      const site = await serveSite(root, flags.host, flags.port);
      // Runs until Ctrl-C or SIGTERM, then closes the server and exits 0 (listening before the address is printed).
      const stopped = new Promise<void>((resolve) => {
        const stop = () => {
          process.off("SIGINT", stop);
          process.off("SIGTERM", stop);
          void site.close().then(resolve);
        };
        process.on("SIGINT", stop);
        process.on("SIGTERM", stop);
      });
      process.stdout.write(`kiln web: ${site.url} (serving ${root}; Ctrl-C to stop)\n`);
      await stopped;
    });
}
