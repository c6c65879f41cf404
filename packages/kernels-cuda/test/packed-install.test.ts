import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installTarballs, linkWorkspacePackage, packPackage } from "@kiln/tooling/packed-install";

// The package as an outside user installs it: the packed tarball alone in a fresh
// folder (no @kiln/contract, no addon). It must load on a machine without a GPU,
// driver or built addon and say why in its status and errors; find an addon through
// KILN_CUDA_ADDON / KILN_CUDA_SIM_ADDON; refuse require() saying why; stand alone as
// types that reject misuse; and give a browser bundle no node: import.
const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const repoRoot = path.resolve(pkgDir, "../..");
const example = fs.readFileSync(path.join(repoRoot, "examples/gpu-node/fill.mjs"), "utf8");
const hasDriver = fs.existsSync("/proc/driver/nvidia/version");
const workspaceAddon = path.join(pkgDir, "build/Release/kiln_cuda.node");
const workspaceSim = path.join(pkgDir, "build-sim/Release/kiln_cuda_sim.node");
let tarball: string;
let app: string;

beforeAll(() => {
  const packed = fs.mkdtempSync(path.join(os.tmpdir(), "kiln-kernels-cuda-pack-"));
  tarball = packPackage(pkgDir, packed);
  app = installTarballs("kiln-kernels-cuda-node-", [tarball]);
  fs.writeFileSync(path.join(app, "fill.mjs"), example);
}, 60_000);
afterAll(() => {
  fs.rmSync(path.dirname(tarball), { recursive: true, force: true });
  fs.rmSync(app, { recursive: true, force: true });
});

/** Runs node in the app folder with none of the KILN_* variables this process may have. */
function node(args: string[], env: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("KILN_")));
  const r = spawnSync(process.execPath, args, { cwd: app, encoding: "utf8", timeout: 60_000, env: { ...clean, ...env } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

interface FillOutcome {
  driver: string;
  addon: string;
  device: string | null;
  values?: number[];
  why?: string;
  hint?: string;
}

function runFill(args: string[], env: Record<string, string> = {}): FillOutcome {
  const r = node(args, env);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stderr).toBe("");
  return JSON.parse(r.stdout) as FillOutcome;
}

const installedAddon = () => path.join(app, "node_modules/@kiln/kernels-cuda/build/Release/kiln_cuda.node");

describe("the packed @kiln/kernels-cuda in Node", () => {
  it("carries only what its entries use: the bundles and the declarations, no sources and no addon", () => {
    const files = execFileSync("tar", ["tzf", tarball], { encoding: "utf8" }).trim().split("\n").map((f) => f.replace(/^package\//, ""));
    const unexpected = files.filter((f) => !/^(package\.json|README\.md|dist\/(index\.js|browser\.js|require\.cjs|types\/.+\.d\.ts))$/.test(f));
    expect(unexpected).toEqual([]);
    expect(files).toEqual(expect.arrayContaining(["dist/index.js", "dist/browser.js", "dist/require.cjs", "dist/types/index.d.ts", "dist/types/contract/index.d.ts"]));
    expect(fs.readdirSync(path.join(app, "node_modules")).filter((d) => !d.startsWith("."))).toEqual(["@kiln"]);
    expect(fs.readdirSync(path.join(app, "node_modules", "@kiln"))).toEqual(["kernels-cuda"]);
  });

  it("runs examples/gpu-node/fill.mjs without an addon and says where it looked and how to get one", () => {
    const out = runFill(["fill.mjs"]);
    expect(out.device).toBeNull();
    expect(out.addon).toBe(
      `${installedAddon()} does not exist (the CUDA addon is not in the npm package): ` +
        "build it in kiln's repository with 'pnpm --filter @kiln/kernels-cuda build' and set KILN_CUDA_ADDON to the kiln_cuda.node it writes",
    );
    // The driver is named first when it is missing: without one, an addon would not help.
    expect(out.why).toBe(hasDriver ? `cannot use the GPU: ${out.addon}` : `cannot use the GPU: ${out.driver}`);
    expect(out.hint).toMatch(hasDriver ? /build the CUDA kernels/ : /install the NVIDIA driver/);
  });

  it("runs the same code through node --input-type=module -e", () => {
    const out = runFill(["--input-type=module", "-e", example]);
    expect(out.device).toBeNull();
    expect(out.addon).toMatch(/kiln_cuda\.node does not exist \(the CUDA addon is not in the npm package\)/);
  });

  it("names KILN_CUDA_ADDON when it points at no file", () => {
    const out = runFill(["fill.mjs"], { KILN_CUDA_ADDON: "/nonexistent/kiln_cuda.node" });
    expect(out.addon).toBe("KILN_CUDA_ADDON=/nonexistent/kiln_cuda.node, but there is no such file");
  });

  it("loads the addon KILN_CUDA_ADDON names (the workspace's build), with or without a driver", (ctx) => {
    if (!fs.existsSync(workspaceAddon)) return ctx.skip(`${workspaceAddon} is not built here (no nvcc)`);
    const out = runFill(["fill.mjs"], { KILN_CUDA_ADDON: workspaceAddon });
    expect(out.addon.startsWith(`${workspaceAddon} (sm_80, `)).toBe(true);
    expect(out.addon).toMatch(/sm_120\)$/);
    if (hasDriver) {
      expect(out.values).toEqual([1.5, 1.5, 1.5, 1.5]);
    } else {
      expect(out.device).toBeNull();
      expect(out.why).toBe(`cannot use the GPU: no NVIDIA driver`);
    }
  });

  it("runs the kernels on the CUDA simulator that KILN_CUDA_SIM_ADDON names", (ctx) => {
    if (!fs.existsSync(workspaceSim)) return ctx.skip(`${workspaceSim} is not built here (no clang++ or CUDA headers)`);
    const out = runFill(["fill.mjs", "--sim"], { KILN_CUDA_SIM_ADDON: workspaceSim });
    expect(out.values).toEqual([1.5, 1.5, 1.5, 1.5]);
    expect(out.device).toBe("cuda-sim (CUDA kernels on the host CPU)");
  });

  it("finds an addon copied to build-sim/Release/ in the installed package, the place the package's build writes it", (ctx) => {
    if (!fs.existsSync(workspaceSim)) return ctx.skip(`${workspaceSim} is not built here (no clang++ or CUDA headers)`);
    const target = path.join(app, "node_modules/@kiln/kernels-cuda/build-sim/Release/kiln_cuda_sim.node");
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.copyFileSync(workspaceSim, target);
    try {
      const out = runFill(["fill.mjs", "--sim"]);
      expect(out.values).toEqual([1.5, 1.5, 1.5, 1.5]);
    } finally {
      fs.rmSync(path.join(app, "node_modules/@kiln/kernels-cuda/build-sim"), { recursive: true, force: true });
    }
  });

  it("refuses require() with a message that says to import it", () => {
    const r = node(["-e", 'require("@kiln/kernels-cuda")']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/@kiln\/kernels-cuda is an ES module and cannot be loaded with require\(\)\. Use import/);
  });
});

const CONSUMER = `
import { createCudaBackend, cudaStatus, gpuPeakFlops, type CudaBackendOptions, type CudaStatus } from "@kiln/kernels-cuda";

const status: CudaStatus = cudaStatus();
const why: string = status.runtime.error;
const options: CudaBackendOptions = { device: 0, tf32: true };
const gpu = createCudaBackend(options);
const buffer = gpu.alloc(16);
gpu.kernels.fill({ out: buffer, n: 4, value: 1.5, dtype: "bf16" });
await gpu.download(buffer, new Uint16Array(4));
const peak: number | undefined = gpuPeakFlops("NVIDIA H100 80GB HBM3")?.bf16;
// @ts-expect-error device is a number
createCudaBackend({ device: "0" });
// @ts-expect-error there is no option devcie
createCudaBackend({ devcie: 1 });
// @ts-expect-error f64 is not a contract dtype
gpu.kernels.fill({ out: buffer, n: 4, value: 1.5, dtype: "f64" });
// @ts-expect-error fill has no argument count
gpu.kernels.fill({ out: buffer, count: 4, value: 1.5, dtype: "f32" });
// @ts-expect-error the driver's detail is a string
const found: number = status.driver.detail;
console.log(why, peak, found);
`;

describe("the packed types, without @kiln/contract installed", () => {
  const tsc = path.join(repoRoot, "node_modules/typescript/bin/tsc");
  for (const resolution of [
    { module: "NodeNext", moduleResolution: "NodeNext" },
    { module: "ESNext", moduleResolution: "Bundler" },
  ]) {
    it(`type-check a strict consumer (${resolution.moduleResolution}) and reject misuse`, () => {
      const dir = path.join(app, `ts-${resolution.moduleResolution}`);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, "consumer.ts"), CONSUMER);
      const compilerOptions = { ...resolution, target: "ES2022", lib: ["ES2022", "DOM"], strict: true, noEmit: true, skipLibCheck: false, types: [] };
      fs.writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions, files: ["consumer.ts"] }));
      const r = spawnSync(process.execPath, [tsc, "-p", dir], { cwd: dir, encoding: "utf8" });
      expect(r.stdout + r.stderr).toBe("");
      expect(r.status).toBe(0);
    });
  }
});

const PAGE_SCRIPT = `
import { createCudaBackend, cudaStatus, gpuPeakFlops } from "@kiln/kernels-cuda";

let error;
try {
  createCudaBackend();
} catch (e) {
  error = { name: e.name, message: e.message, hint: e.hint };
}
console.log(JSON.stringify({ addon: cudaStatus().addon, peak: gpuPeakFlops("NVIDIA H100 80GB HBM3")?.bf16, error }));
`;

describe("a browser bundle of the packed package (esbuild, platform browser)", () => {
  let bundle: { code: string; log: string };
  beforeAll(() => {
    fs.writeFileSync(path.join(app, "page.mjs"), PAGE_SCRIPT);
    linkWorkspacePackage(app, "esbuild", path.join(pkgDir, "package.json"));
    const r = spawnSync(process.execPath, ["node_modules/esbuild/bin/esbuild", "page.mjs", "--bundle", "--platform=browser", "--format=esm", "--outfile=out/page.js", "--log-level=warning"], {
      cwd: app,
      encoding: "utf8",
    });
    if (r.status !== 0) throw new Error(`esbuild failed:\n${r.stdout}${r.stderr}`);
    bundle = { code: fs.readFileSync(path.join(app, "out/page.js"), "utf8"), log: r.stdout + r.stderr };
  }, 60_000);

  it("builds with no warning and no node: import", () => {
    expect(bundle.log).toBe("");
    expect(bundle.code).not.toMatch(/["']node:|\bprocess\.env\b|createRequire/);
  });

  it("gets the same names as Node, a status saying why there is no GPU, and a DeviceError from the backends", () => {
    const r = node(["out/page.js"]);
    expect(r.code, r.stderr).toBe(0);
    const why = "@kiln/kernels-cuda runs in Node only: its CUDA kernels are a Node native addon, which a browser cannot load";
    expect(JSON.parse(r.stdout)).toEqual({
      addon: { built: false, archs: [], detail: why },
      peak: 989e12,
      error: { name: "DeviceError", message: `cannot use the GPU: ${why}`, hint: "in a browser, use @kiln/kernels-wasm (WebAssembly kernels on the CPU's cores)" },
    });
  });

  it("exports the same names from its browser and Node entries", async () => {
    const dist = path.join(app, "node_modules/@kiln/kernels-cuda/dist");
    const names = async (file: string) => Object.keys(await import(path.join(dist, file))).sort();
    expect(await names("browser.js")).toEqual(await names("index.js"));
  });
});
