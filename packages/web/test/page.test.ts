import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { getTokenizer } from "@kiln/core";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HeadlessChromium, chromiumMissingReason, launchChromium } from "./support/chromium.js";
import { servePlain } from "./support/plain-server.js";

// The built page in headless Chromium: served by `kiln web` (cross-origin isolated) it
// trains nano-start on every core, samples, and its checkpoint samples the same in
// `kiln sample`, and the reverse; served by a plain static host it trains on one thread.
const missing = chromiumMissingReason();
const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const repoRoot = path.resolve(pkgDir, "../..");
const kiln = path.join(repoRoot, "packages/cli/dist/bin/kiln.js");
const PROMPT = "Once upon a time";

interface PageView {
  device?: { name: string; threads: number; isolated: boolean; why: string };
  state: string;
  step: number;
  losses: { step: number; loss: number; "tokens/s": number }[];
  valLosses: { step: number; val_loss: number }[];
  samples: { text: string; tokens: number[] }[];
  errors: string[];
}

let work: string;
let site: string;
let browser: HeadlessChromium | undefined;
let kilnWeb: { url: string; process: ChildProcess } | undefined;

function runKiln(args: string[], env: NodeJS.ProcessEnv = {}): { stdout: string; stderr: string; status: number | null } {
  const r = spawnSync(process.execPath, [kiln, ...args], { cwd: work, encoding: "utf8", timeout: 180_000, env: { ...process.env, ...env } });
  return { stdout: r.stdout, stderr: r.stderr, status: r.status };
}

/** `kiln web --dir <site> --port 0`, and the URL it prints. */
async function startKilnWeb(): Promise<{ url: string; process: ChildProcess }> {
  const child = spawn(process.execPath, [kiln, "web", "--dir", site, "--port", "0"], { cwd: work });
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kiln web did not start:\n${out}`)), 30_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /kiln web: (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => reject(new Error(`kiln web exited with ${code}:\n${out}`)));
  });
  return { url, process: child };
}

const view = (page: Page) => page.evaluate(() => (globalThis as unknown as { kilnPage: PageView }).kilnPage);

/** Waits until the page's view satisfies `test` (or shows an error, which fails the test). */
async function waitFor(page: Page, test: string, timeout: number): Promise<PageView> {
  await page.waitForFunction(`(() => { const v = globalThis.kilnPage; return v && (v.errors.length > 0 || (${test})); })()`, null, { timeout, polling: 250 });
  const v = await view(page);
  expect(v.errors).toEqual([]);
  return v;
}

async function openPage(url: string): Promise<Page> {
  const page = await browser!.context.newPage();
  const failed: string[] = [];
  page.on("requestfailed", (r) => failed.push(r.url()));
  page.on("response", (r) => r.status() >= 400 && failed.push(`${r.status()} ${r.url()}`));
  page.on("request", (r) => !r.url().startsWith(new URL(url).origin) && !r.url().startsWith("blob:") && failed.push(`outside request: ${r.url()}`));
  await page.goto(url);
  await waitFor(page, "v.device !== undefined", 60_000);
  (page as Page & { failedRequests: string[] }).failedRequests = failed;
  return page;
}

async function train(page: Page, steps: number, timeout: number): Promise<PageView> {
  await page.fill("#steps", String(steps));
  await page.click("#start");
  return waitFor(page, `v.state === "done" && v.step === ${steps}`, timeout);
}

async function sample(page: Page): Promise<{ text: string; tokens: number[] }> {
  const before = (await view(page)).samples.length;
  await page.fill("#prompt", PROMPT);
  await page.click("#generate");
  const v = await waitFor(page, `v.samples.length > ${before}`, 60_000);
  return v.samples.at(-1)!;
}

/** What `kiln sample` prints for a checkpoint, with the page's sampling settings (its defaults: 200 tokens, 0.8, top-k 40, seed 0). */
function cliSample(checkpoint: string): string {
  const r = runKiln(["sample", "--checkpoint", checkpoint, "--prompt", PROMPT, "--max-tokens", "200", "--temperature", "0.8", "--top-k", "40", "--seed", "0"]);
  expect(r.stderr).toBe("");
  expect(r.status).toBe(0);
  return r.stdout;
}

beforeAll(async () => {
  if (missing) return;
  work = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-web-test-"));
  site = path.join(work, "site");
  const built = spawnSync(process.execPath, [path.join(pkgDir, "node_modules/vite/bin/vite.js"), "build", "--outDir", site, "--emptyOutDir", "--logLevel", "warn"], { cwd: pkgDir, encoding: "utf8", timeout: 120_000 });
  if (built.status !== 0) throw new Error(`vite build failed:\n${built.stdout}${built.stderr}`);
  kilnWeb = await startKilnWeb();
  browser = await launchChromium();
}, 180_000);

afterAll(async () => {
  kilnWeb?.process.kill();
  await browser?.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

describe("the page served by kiln web (cross-origin isolated)", () => {
  let page: Page;

  it("trains nano-start 200 steps on every core in a worker; the loss falls by more than 1 nat", async (ctx) => {
    if (missing) return ctx.skip(missing);
    page = await openPage(kilnWeb!.url);
    const { device } = await view(page);
    expect(device!.isolated).toBe(true);
    expect(device!.threads).toBe(Math.max(1, os.availableParallelism()));
    expect(await page.textContent("#device")).toMatch(/cross-origin isolated \(COOP\/COEP headers\), so \d+ threads/);
    const v = await train(page, 200, 240_000);
    const first = v.losses[0];
    const last = v.losses.at(-1)!;
    expect(first.step).toBe(1);
    expect(last.step).toBe(200);
    expect(first.loss - last.loss).toBeGreaterThan(1.0);
    expect(v.valLosses.at(-1)!.step).toBe(200);
    expect(v.valLosses.at(-1)!.val_loss).toBeLessThan(first.loss - 1.0);
    // The memory plan, as kiln train's banner prints it for the same config.
    const cli = runKiln(["train", "-f", path.join(repoRoot, "models/nano-start.yaml"), "--max-steps", "1", "--headless", "--output-dir", path.join(work, "one-step")]);
    expect(cli.status, cli.stderr).toBe(0);
    const memory = /memory {2}(\S+ \S+ of .*)/;
    expect(memory.exec((await page.textContent("#log"))!)?.[1]).toBe(memory.exec(cli.stderr)?.[1]);
  });

  it("samples from the current weights; its checkpoint samples the same tokens in kiln sample", async (ctx) => {
    if (missing) return ctx.skip(missing);
    const s = await sample(page);
    expect(s.tokens.length).toBe(200);
    expect(s.text.startsWith(PROMPT)).toBe(true);
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#download")]);
    expect(download.suggestedFilename()).toBe("step_200.safetensors");
    const file = path.join(work, "page", "step_200.safetensors");
    await download.saveAs(file);
    const printed = cliSample(file);
    expect(printed).toBe(`${s.text}\n`);
    // Byte tokens: the tokens are the bytes of the text after the prompt.
    expect([...Buffer.from(printed.slice(PROMPT.length, -1), "utf8")]).toEqual(s.tokens);
    // kiln train resumes from it.
    const resumed = runKiln(["train", "-f", path.join(repoRoot, "models/nano-start.yaml"), "--max-steps", "205", "--resume", file, "--headless", "--output-dir", path.join(work, "resumed")]);
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(resumed.stderr).toMatch(/resumed from .*step_200\.safetensors at step 200/);
    const shot = await page.screenshot({ path: process.env.KILN_WEB_SCREENSHOT ?? path.join(work, "page.png"), fullPage: true });
    expect(shot.subarray(1, 4).toString()).toBe("PNG");
    expect((page as Page & { failedRequests: string[] }).failedRequests).toEqual([]);
  });

  it("loads kiln train's step and final checkpoints and samples what kiln sample prints for them", async (ctx) => {
    if (missing) return ctx.skip(missing);
    const out = path.join(work, "cli-run");
    const r = runKiln(["train", "-f", path.join(repoRoot, "models/nano-start.yaml"), "--max-steps", "20", "--headless", "--output-dir", out]);
    expect(r.status, r.stderr).toBe(0);
    const file = path.join(out, "step_20.safetensors");
    const page = await openPage(kilnWeb!.url);
    await page.setInputFiles("#upload", file);
    await waitFor(page, `v.state === "paused" && v.step === 20`, 60_000);
    expect(await page.textContent("#log")).toMatch(/resumed from step_20\.safetensors at step 20/);
    const s = await sample(page);
    expect(`${s.text}\n`).toBe(cliSample(file));

    // Trained weights alone (final.safetensors, no optimizer state): loaded to sample from.
    const final = path.join(out, "final.safetensors");
    await page.setInputFiles("#upload", final);
    await waitFor(page, `v.state === "loaded"`, 60_000);
    expect(await page.textContent("#log")).toMatch(/loaded final\.safetensors: trained weights \(step 20\), to sample from/);
    const f = await sample(page);
    expect(`${f.text}\n`).toBe(cliSample(final));
    expect(f.text).toBe(s.text);
    await page.close();
  });

  it("refuses a model over WebAssembly's 4 GiB before allocating, with the CLI's message", async (ctx) => {
    if (missing) return ctx.skip(missing);
    const big = "model:\n  arch: gpt2\n  vocab_size: 256\n  hidden_size: 2048\n  num_layers: 48\n  num_heads: 16\n  max_seq_len: 1024\ntrainer:\n  batch_size: 8\n  max_steps: 10\ndata:\n  tokenizer: bytes\n";
    fs.writeFileSync(path.join(work, "big.yaml"), big);
    const page = await openPage(kilnWeb!.url);
    await page.fill("#config", big);
    await page.click("#start");
    await page.waitForFunction(() => (globalThis as unknown as { kilnPage: PageView }).kilnPage.errors.length > 0, null, { timeout: 60_000 });
    const pageError = (await view(page)).errors[0];
    // The page has no native kernels; the CLI without them names the same device.
    const cli = runKiln(["train", "-f", "big.yaml", "--headless", "--output-dir", path.join(work, "big-run")], { KILN_NATIVE: "0" });
    expect(cli.status).not.toBe(0);
    const message = /MemoryError[^:]*: (training needs \S+ \S+ but .* has \S+ \S+)/;
    expect(pageError).toMatch(message);
    expect(message.exec(pageError)![1]).toBe(message.exec(cli.stderr)?.[1]);
    expect((await view(page)).state).toBe("idle");
    await page.close();
  });
});

describe("the page on a static host without COOP/COEP", () => {
  it("stops at a non-finite loss, naming the step, as kiln train does", async (ctx) => {
    if (missing) return ctx.skip(missing);
    const server = await servePlain(site);
    try {
      const page = await openPage(server.url);
      const config = (await page.inputValue("#config")).replace("learning_rate: 3.0e-3", "learning_rate: 1.0e+30").replace("grad_clip: 1.0", "grad_clip: 0");
      expect(config).toContain("learning_rate: 1.0e+30");
      await page.fill("#config", config);
      await page.fill("#steps", "20");
      await page.click("#start");
      await page.waitForFunction(() => (globalThis as unknown as { kilnPage: PageView }).kilnPage.errors.length > 0, null, { timeout: 60_000 });
      const v = await view(page);
      expect(v.errors[0]).toMatch(/^TrainingError in the config \(step (\d+)\): the loss or the gradients became NaN or infinite at step \1; the last finite loss was [\d.]+ at step \d+\n {2}what to do: lower the learning rate/);
      expect(v.state).toBe("paused");
      expect(v.step).toBeLessThan(20);
      await page.close();
    } finally {
      await server.close();
    }
  });

  it("says why it has one thread, trains on it, and samples while it trains", async (ctx) => {
    if (missing) return ctx.skip(missing);
    const server = await servePlain(site);
    try {
      const page = await openPage(server.url);
      const { device } = await view(page);
      expect(device!.isolated).toBe(false);
      expect(device!.threads).toBe(1);
      expect(await page.textContent("#device")).toMatch(/x 1 thread: the page is not cross-origin isolated .*SharedArrayBuffer is unavailable/);
      await page.fill("#steps", "30");
      await page.click("#start");
      // A sample asked for while it trains comes between two steps; training goes on after it.
      await waitFor(page, `v.state === "training" && v.step >= 1`, 60_000);
      await page.fill("#max-tokens", "20");
      await page.click("#generate");
      const during = await waitFor(page, "v.samples.length === 1", 60_000);
      expect(during.samples[0].tokens.length).toBe(20);
      expect(during.state).toBe("training");
      const v = await waitFor(page, `v.state === "done" && v.step === 30`, 120_000);
      expect(v.losses[0].step).toBe(1);
      expect(v.losses[0].loss - v.losses.at(-1)!.loss).toBeGreaterThan(0.5);
      await page.close();
    } finally {
      await server.close();
    }
  });

  it("pauses and resumes, and trains on a text file given to the page, tokenized by bytes and by gpt2", async (ctx) => {
    if (missing) return ctx.skip(missing);
    const server = await servePlain(site);
    try {
      const page = await openPage(server.url);
      const text = Array.from({ length: 400 }, (_, i) => `Line ${i}: the quick brown fox jumps over the lazy dog.\n`).join("");
      await page.setInputFiles("#text-file", { name: "fox.txt", mimeType: "text/plain", buffer: Buffer.from(text) });
      await page.waitForFunction(() => (document.getElementById("data-text") as HTMLInputElement).checked);
      await page.fill("#steps", "40");
      await page.click("#start");
      await waitFor(page, `v.state === "training" && v.step >= 1`, 60_000);
      await page.click("#pause");
      const paused = await waitFor(page, `v.state === "paused"`, 30_000);
      expect(await page.textContent("#pause")).toBe("Resume");
      // Paused: no step is taken while the page waits.
      await page.waitForTimeout(1000);
      expect((await view(page)).step).toBe(paused.step);
      expect(paused.step).toBeLessThan(40);
      await page.click("#pause");
      const v = await waitFor(page, `v.state === "done" && v.step === 40`, 120_000);
      expect(await page.textContent("#log")).toMatch(/data {4}fox\.txt, bytes tokens: 21,890 tokens/);
      expect(v.losses[0].loss - v.losses.at(-1)!.loss).toBeGreaterThan(1.0);

      // The same file with the gpt2 tokenizer: as many ids as kiln prepare writes (<|endoftext|>, then the text's).
      const gpt2 = await getTokenizer("gpt2");
      const config = "model:\n  arch: gpt2\n  vocab_size: 50257\n  hidden_size: 32\n  num_layers: 1\n  num_heads: 2\n  max_seq_len: 32\ntrainer:\n  batch_size: 2\ndata:\n  tokenizer: gpt2\n";
      await page.fill("#config", config);
      const w = await train(page, 3, 120_000);
      const expected = 1 + gpt2.encode(text).length;
      expect(await page.textContent("#log")).toContain(`data    fox.txt, gpt2 tokens: ${expected.toLocaleString("en-US")} tokens`);
      expect(w.losses[0].loss).toBeGreaterThan(Math.log(50257) - 1);
      await page.close();
    } finally {
      await server.close();
    }
  });
});
