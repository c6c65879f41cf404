#!/usr/bin/env node
// Training throughput in one browser page: kiln's page (packages/web) training bench-tiny
// in its worker, then TensorFlow.js's wasm backend training the same GPT-2 (batch 8 x 128,
// f32) on the same page; prints one JSON object with both tokens/s and their ratio.
//
//   node tooling/bench/web-train-tfjs.mjs [--kiln-steps 50] [--tfjs-steps 4]
//
// Needs: the page built (pnpm --filter @kiln/web build), tooling/bench's own dependencies
// (pnpm --dir tooling/bench install --ignore-workspace) and Debian's Chromium (/usr/bin/chromium).
// The page is served cross-origin isolated, so both may use threads: kiln's kernels take
// every core; TensorFlow.js is given as many (setThreadsCount, and a doubled
// navigator.hardwareConcurrency on the page's main thread, since it takes half of it) and
// reports what it used.
// Figures: kiln's tokens/s per log interval of 10 steps after the first step (median and
// best); TensorFlow.js's per step after 2 warm-up steps (median and best).
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "../..");
const site = path.join(repoRoot, "packages/web/dist");
const CHROMIUM = "/usr/bin/chromium";
const { values } = parseArgs({ options: { "kiln-steps": { type: "string", default: "50" }, "tfjs-steps": { type: "string", default: "4" } } });
const kilnSteps = Number(values["kiln-steps"]);
const tfjsSteps = Number(values["tfjs-steps"]);
const TFJS_WARMUP = 2;

function skip(why) {
  console.log(JSON.stringify({ benchmark: "web-train-tfjs", skipped: why }));
  process.exit(0);
}

if (!existsSync(path.join(site, "index.html"))) skip("the page is not built: pnpm --filter @kiln/web build");
if (!existsSync(CHROMIUM)) skip(`${CHROMIUM} is absent: apt-get install chromium`);
const benchRequire = createRequire(path.join(here, "package.json"));
let wasmDir;
try {
  wasmDir = path.dirname(benchRequire.resolve("@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm"));
} catch {
  skip("@tensorflow/tfjs-backend-wasm is not installed: pnpm --dir tooling/bench install --ignore-workspace");
}
const { chromium } = createRequire(path.join(repoRoot, "packages/web/package.json"))("playwright-core");
const { build } = await import("esbuild");

const bundle = await build({
  entryPoints: [path.join(here, "tfjs-gpt2-page.mjs")],
  bundle: true,
  platform: "browser",
  format: "esm",
  write: false,
  nodePaths: [path.join(here, "node_modules")],
  logLevel: "error",
  // The emscripten glue names Node modules on paths a browser never takes.
  external: ["fs", "path", "os", "crypto", "worker_threads", "perf_hooks"],
});
const html = readFileSync(path.join(site, "index.html"), "utf8").replace("</body>", '<script type="module" src="/tfjs-bench.js"></script>\n</body>');

const TYPES = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".wasm": "application/wasm" };
const server = createServer((req, res) => {
  const url = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
  const headers = { "Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp", "Cross-Origin-Resource-Policy": "same-origin" };
  let body;
  let file = url;
  try {
    if (url === "/") body = html;
    else if (url === "/tfjs-bench.js") body = bundle.outputFiles[0].contents;
    else if (url.startsWith("/tfjs/")) body = readFileSync(path.join(wasmDir, path.basename(url)));
    else body = readFileSync(path.join(site, path.normalize(url)));
  } catch {
    res.writeHead(404).end();
    return;
  }
  if (url === "/") file = "index.html";
  res.writeHead(200, { "Content-Type": TYPES[path.extname(file)] ?? "application/octet-stream", ...headers }).end(body);
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const origin = `http://127.0.0.1:${server.address().port}`;

const profile = await mkdtemp(path.join(os.tmpdir(), "kiln-bench-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: CHROMIUM,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const round = (x, digits = 1) => Number(x.toFixed(digits));
try {
  const page = await context.newPage();
  // TensorFlow.js's wasm backend takes half of navigator.hardwareConcurrency as its thread cap
  // (it assumes two hardware threads per core): the page's main thread, where it runs, reports
  // twice the cores, so that it may use every core as kiln does (kiln's worker sees the real count).
  await page.addInitScript((cores) => Object.defineProperty(Navigator.prototype, "hardwareConcurrency", { get: () => 2 * cores }), os.availableParallelism());
  if (process.env.KILN_BENCH_VERBOSE) {
    page.on("console", (m) => process.stderr.write(`page: ${m.text()}\n`));
    page.on("pageerror", (e) => process.stderr.write(`page error: ${e}\n`));
    page.on("worker", (w) => {
      process.stderr.write(`worker: ${w.url().slice(0, 80)}\n`);
      w.on("console", (m) => process.stderr.write(`worker console: ${m.text()}\n`));
    });
  }
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => globalThis.kilnPage?.device && typeof globalThis.tfjsTrainGpt2 === "function", null, { timeout: 60_000 });
  const device = await page.evaluate(() => globalThis.kilnPage.device);
  await page.selectOption("#preset", "bench-tiny");
  await page.fill("#steps", String(kilnSteps));
  await page.click("#start");
  await page.waitForFunction((steps) => globalThis.kilnPage.errors.length > 0 || (globalThis.kilnPage.state === "done" && globalThis.kilnPage.step === steps), kilnSteps, { timeout: 600_000, polling: 500 });
  const kiln = await page.evaluate(() => globalThis.kilnPage);
  if (kiln.errors.length) throw new Error(kiln.errors.join("\n"));
  const kilnRates = kiln.losses.filter((l) => l.step > 1).map((l) => l["tokens/s"]);

  const model = { vocabSize: 4096, hiddenSize: 256, numLayers: 4, numHeads: 4, seqLen: 128, batchSize: 8 };
  const threads = device.threads;
  const tfjs = await page.evaluate((o) => globalThis.tfjsTrainGpt2(o), { model, steps: TFJS_WARMUP + tfjsSteps, wasmDir: `${origin}/tfjs/`, threads });
  const tokens = model.batchSize * model.seqLen;
  const tfjsRates = tfjs.seconds.slice(TFJS_WARMUP).map((s) => tokens / s);
  const result = {
    benchmark: "web-train-tfjs",
    model: "bench-tiny (gpt2, vocab 4096, hidden 256, 4 layers, 4 heads, batch 8 x seq 128, f32)",
    browser: `Chromium ${context.browser()?.version() ?? ""}`.trim(),
    cpu: os.cpus()[0]?.model,
    cores: os.availableParallelism(),
    kiln: {
      device: device.name,
      steps: kilnSteps,
      tokens_per_s_median: round(median(kilnRates)),
      tokens_per_s_best: round(Math.max(...kilnRates)),
      loss_first: round(kiln.losses[0].loss, 4),
      loss_last: round(kiln.losses.at(-1).loss, 4),
      optimizer: "AdamW, grad clip 1.0",
    },
    tfjs: {
      version: tfjs.version,
      threads: tfjs.threads,
      simd: tfjs.simd,
      multithread: tfjs.multithread,
      steps: tfjsSteps,
      warmup_steps: TFJS_WARMUP,
      tokens_per_s_median: round(median(tfjsRates)),
      tokens_per_s_best: round(Math.max(...tfjsRates)),
      loss_first: round(tfjs.losses[0], 4),
      loss_last: round(tfjs.losses.at(-1), 4),
      optimizer: "Adam (tfjs has no AdamW; no clipping)",
    },
  };
  result.ratio_median = round(result.kiln.tokens_per_s_median / result.tfjs.tokens_per_s_median, 2);
  result.ratio_best = round(result.kiln.tokens_per_s_best / result.tfjs.tokens_per_s_best, 2);
  console.log(JSON.stringify(result, null, 2));
} finally {
  await context.close();
  await rm(profile, { recursive: true, force: true });
  server.close();
}
