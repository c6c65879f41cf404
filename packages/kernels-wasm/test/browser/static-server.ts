import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** A response body and its content type. */
export interface Asset {
  body: string | Uint8Array;
  type: string;
}

/** Resolves a URL path to an asset, or undefined for 404. */
export type Routes = (path: string) => Promise<Asset | undefined>;

export interface StaticServer {
  origin: string;
  close(): Promise<void>;
}

/** The headers that make a page cross-origin isolated (SharedArrayBuffer, shared WebAssembly.Memory). */
const ISOLATION_HEADERS = {
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Embedder-Policy": "require-corp",
  "Cross-Origin-Resource-Policy": "same-origin",
};

/** Serves `routes` on 127.0.0.1 at a random port, with or without the isolation headers on every response. */
export async function startStaticServer(routes: Routes, opts: { isolated: boolean }): Promise<StaticServer> {
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    routes(path).then(
      (asset) => {
        if (!asset) {
          res.writeHead(404, { "Content-Type": "text/plain" }).end(`not found: ${path}`);
          return;
        }
        res.writeHead(200, {
          "Content-Type": asset.type,
          "Cache-Control": "no-store",
          ...(opts.isolated ? ISOLATION_HEADERS : {}),
        });
        res.end(asset.body);
      },
      (error: unknown) => res.writeHead(500, { "Content-Type": "text/plain" }).end(String(error)),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A file from disk as an asset. */
export async function fileAsset(url: URL, type: string): Promise<Asset> {
  return { body: new Uint8Array(await readFile(url)), type };
}
