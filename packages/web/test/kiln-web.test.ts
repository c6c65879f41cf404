import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// `kiln web` without a browser: what it serves, with which headers, and what it refuses.
const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const kiln = path.resolve(pkgDir, "../cli/dist/bin/kiln.js");
let work: string;
let site: string;
let server: { url: string; process: ChildProcess };

beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-web-serve-"));
  site = path.join(work, "site");
  const built = spawnSync(process.execPath, [path.join(pkgDir, "node_modules/vite/bin/vite.js"), "build", "--outDir", site, "--emptyOutDir", "--logLevel", "warn"], { cwd: pkgDir, encoding: "utf8", timeout: 120_000 });
  if (built.status !== 0) throw new Error(`vite build failed:\n${built.stdout}${built.stderr}`);
  fs.writeFileSync(path.join(work, "secret.txt"), "outside the site");
  const child = spawn(process.execPath, [kiln, "web", "--dir", site, "--port", "0"]);
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /kiln web: (http:\/\/127\.0\.0\.1:\d+\/) \(serving (.*); Ctrl-C to stop\)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.once("exit", (code) => reject(new Error(`kiln web exited with ${code}: ${out}`)));
  });
  server = { url, process: child };
}, 180_000);

afterAll(() => {
  server?.process.kill("SIGINT");
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

describe("kiln web", () => {
  it("serves the page and its assets with the cross-origin isolation headers", async () => {
    const page = await fetch(server.url);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.headers.get("cross-origin-opener-policy")).toBe("same-origin");
    expect(page.headers.get("cross-origin-embedder-policy")).toBe("require-corp");
    expect(await page.text()).toContain("<title>kiln: train a language model in this tab</title>");
    const wasm = fs.readdirSync(path.join(site, "assets")).find((f) => f.endsWith(".wasm"))!;
    const asset = await fetch(new URL(`assets/${wasm}`, server.url));
    expect(asset.status).toBe(200);
    expect(asset.headers.get("content-type")).toBe("application/wasm");
    expect(asset.headers.get("cross-origin-embedder-policy")).toBe("require-corp");
    expect(Buffer.from(await asset.arrayBuffer()).subarray(0, 4)).toEqual(Buffer.from([0, 0x61, 0x73, 0x6d]));
  });

  it("answers 404 for a missing file and for paths outside the site", async () => {
    expect((await fetch(new URL("nothing-here.js", server.url))).status).toBe(404);
    // A raw request path (fetch would resolve the dot segments before sending it), and an encoded slash.
    const raw = await new Promise<number | undefined>((resolve, reject) => {
      http.get(new URL(server.url), { path: "/../secret.txt" }, (res) => resolve(res.statusCode)).on("error", reject);
    });
    expect(raw).toBe(404);
    expect((await fetch(new URL("/..%2fsecret.txt", server.url))).status).toBe(404);
    // A path that does not decode is refused, and the server goes on.
    expect((await fetch(new URL("/%E0%A4%A", server.url))).status).toBe(400);
    expect((await fetch(server.url)).status).toBe(200);
  });

  it("stops on Ctrl-C with exit code 0", async () => {
    const child = spawn(process.execPath, [kiln, "web", "--dir", site, "--port", "0"]);
    await new Promise<void>((resolve) => child.stdout.on("data", (d: Buffer) => d.toString().includes("kiln web:") && resolve()));
    child.kill("SIGINT");
    expect(await new Promise((resolve) => child.once("exit", resolve))).toBe(0);
  });

  it("refuses a folder without a built page, saying how to build one", () => {
    const r = spawnSync(process.execPath, [kiln, "web", "--dir", work, "--port", "0"], { encoding: "utf8", timeout: 30_000 });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/ConfigError in --dir: .* holds no built page \(index\.html\)\n {2}what to do: build it with pnpm --filter @kiln\/web build/);
  });
});
