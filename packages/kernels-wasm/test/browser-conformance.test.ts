import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundleBrowserEntries, type Bundles } from "./browser/bundle.js";
import { chromiumMissingReason, launchChromium, type HeadlessChromium } from "./browser/chromium.js";
import { kernelPageRoutes } from "./browser/kernel-page.js";
import type { RunReport, RunRequest } from "./browser/run-report.js";
import { type Routes, startStaticServer } from "./browser/static-server.js";

// The package in headless Chromium: a cross-origin isolated page runs the
// conformance cases of every kernel the backend declares on 2 threads (module
// Web Workers on a shared memory); without the isolation headers, or on the
// page's main thread, it must fall back to one thread and say why.
const missing = chromiumMissingReason();
const relaxedBuilt = existsSync(new URL("../build/kernels-relaxed-shared.wasm", import.meta.url));

let bundles: Bundles;
let browser: HeadlessChromium | undefined;

beforeAll(async () => {
  if (missing) return;
  [bundles, browser] = await Promise.all([bundleBrowserEntries(), launchChromium()]);
});

afterAll(async () => {
  await browser?.close();
});

interface PageSetup {
  isolated: boolean;
  /** Changes what the server serves. */
  routes?: (routes: Routes) => Routes;
}

/** Serves the page (with or without COOP/COEP), runs `request` in it and returns the page's report. */
async function runInPage(setup: PageSetup, request: RunRequest): Promise<RunReport> {
  const routes = kernelPageRoutes(bundles);
  const server = await startStaticServer(setup.routes?.(routes) ?? routes, { isolated: setup.isolated });
  const page = await browser!.context.newPage();
  const log: string[] = [];
  page.on("pageerror", (e) => log.push(`page error: ${e.message}`));
  page.on("console", (m) => log.push(`console.${m.type()}: ${m.text()}`));
  try {
    await page.goto(`${server.origin}/`);
    await page.waitForFunction(() => "kilnConformance" in globalThis, undefined, { timeout: 10_000 });
    return await page.evaluate(
      (req) => (globalThis as unknown as { kilnConformance(r: RunRequest): Promise<RunReport> }).kilnConformance(req),
      request,
    );
  } catch (error) {
    throw new Error([error instanceof Error ? error.message : String(error), ...log].join("\n"));
  } finally {
    await page.close();
    await server.close();
  }
}

function summary(r: RunReport): string {
  const kernels = Object.entries(r.passedByKernel).map(([k, n]) => `${k} ${n}`).join(", ");
  const reason = r.runtime.threadLimitReason ? `; ${r.runtime.threadLimitReason}` : "";
  return `${r.device.name} on the ${r.ranOn} thread: ${r.passed} passed, ${r.failed.length} failed, ${r.skipped} skipped in ${r.ms} ms (${kernels})${reason}`;
}

describe("in headless Chromium", () => {
  it("passes the declared kernels' conformance cases on 2 threads in a cross-origin isolated page", async (ctx) => {
    if (missing) return ctx.skip(missing);
    const r = await runInPage({ isolated: true }, { on: "worker", threads: 2, minFlopsPerThread: 0 });
    console.log(`isolated page: ${summary(r)}`);
    expect(r.pageIsolated).toBe(true);
    expect(r.runIsolated).toBe(true);
    expect(r.runtime).toEqual({ simd: relaxedBuilt ? "relaxed" : "plain", threads: 2, sharedMemory: true });
    expect(r.device.parallelism).toBe(2);
    expect(r.device.simd).toBe(relaxedBuilt ? "relaxed-simd" : "simd128");
    expect(r.failed).toEqual([]);
    expect(r.declaredKernels).toContain("matmul");
    for (const kernel of r.declaredKernels) expect(r.passedByKernel[kernel] ?? 0, kernel).toBeGreaterThan(0);
  });

  it("falls back to one thread on an unshared memory in a page without COOP/COEP, and says why", async (ctx) => {
    if (missing) return ctx.skip(missing);
    const r = await runInPage({ isolated: false }, { on: "worker", threads: 2, kernels: ["matmul"] });
    console.log(`page without isolation: ${summary(r)}`);
    expect(r.pageIsolated).toBe(false);
    expect(r.runIsolated).toBe(false);
    expect(r.runtime.threads).toBe(1);
    expect(r.runtime.sharedMemory).toBe(false);
    expect(r.runtime.threadLimitReason).toMatch(/SharedArrayBuffer is unavailable/);
    expect(r.device.parallelism).toBe(1);
    expect(r.failed).toEqual([]);
    expect(r.passedByKernel.matmul ?? 0).toBeGreaterThan(0);
  });

  it("runs on one thread on the page's main thread, which may not block in Atomics.wait", async (ctx) => {
    if (missing) return ctx.skip(missing);
    const r = await runInPage({ isolated: true }, { on: "main", threads: 2, kernels: ["matmul"] });
    console.log(`main thread: ${summary(r)}`);
    expect(r.runIsolated).toBe(true);
    expect(r.runtime.threads).toBe(1);
    expect(r.runtime.sharedMemory).toBe(true);
    expect(r.runtime.threadLimitReason).toMatch(/may not block in Atomics\.wait/);
    expect(r.failed).toEqual([]);
    expect(r.passedByKernel.matmul ?? 0).toBeGreaterThan(0);
  });

  it("reports a kernel worker script that does not load instead of waiting for it forever", async (ctx) => {
    if (missing) return ctx.skip(missing);
    const withoutWorker = (routes: Routes): Routes => (path) => (path.endsWith("/thread-worker-browser.js") ? Promise.resolve(undefined) : routes(path));
    await expect(runInPage({ isolated: true, routes: withoutWorker }, { on: "worker", threads: 2, kernels: ["matmul"] })).rejects.toThrow(
      /kernel worker 1 failed to start: could not load the kernel worker script as a module Worker/,
    );
  });
});
