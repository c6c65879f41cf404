import type { BrowserContext } from "playwright-core";

/** What the example page reports, and what it asked the server for. */
export interface PageVisit {
  result?: { c: number[]; simd: string; threads: number; threadLimitReason?: string };
  error?: string;
  /** URLs answered with a status >= 400. */
  failedRequests: string[];
  /** How many times each .wasm URL was requested. */
  wasmRequests: Record<string, number>;
  workerUrls: string[];
}

/** Opens `url`, waits for the page's `kilnResult` and records requests and workers on the way. */
export async function visitExamplePage(context: BrowserContext, url: string): Promise<PageVisit> {
  const page = await context.newPage();
  const visit: PageVisit = { failedRequests: [], wasmRequests: {}, workerUrls: [] };
  const log: string[] = [];
  page.on("response", (r) => {
    if (r.status() >= 400) visit.failedRequests.push(`${r.status()} ${r.url()}`);
  });
  page.on("request", (r) => {
    if (r.url().split("?")[0].endsWith(".wasm")) visit.wasmRequests[r.url()] = (visit.wasmRequests[r.url()] ?? 0) + 1;
  });
  page.on("worker", (w) => visit.workerUrls.push(w.url()));
  page.on("pageerror", (e) => log.push(`page error: ${e.message}`));
  page.on("console", (m) => log.push(`console.${m.type()}: ${m.text()}`));
  try {
    await page.goto(url);
    await page.waitForFunction(() => "kilnResult" in globalThis, undefined, { timeout: 30_000 });
    const reported = (await page.evaluate(() => (globalThis as { kilnResult?: unknown }).kilnResult)) as Pick<PageVisit, "result" | "error">;
    return { ...visit, ...reported };
  } catch (error) {
    throw new Error([error instanceof Error ? error.message : String(error), ...log, ...visit.failedRequests].join("\n"));
  } finally {
    await page.close();
  }
}
