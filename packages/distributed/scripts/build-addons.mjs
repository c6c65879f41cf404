#!/usr/bin/env node
// Builds the native addons of @kiln/distributed with cmake-js into build/Release/:
//   kiln_shm.node   shared-memory all-reduce for ranks on one machine (`cpu` sync; Linux)
//   kiln_gloo.node  the `gloo` sync backend, when Gloo is installed (Debian: libgloo-dev)
// What was not built, and why, goes to build/build-info.json, which the package
// reports at run time; a missing Gloo does not fail the build (the other sync
// backends do not need it), and neither does a platform without the shm addon.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const info = {};
const writeInfo = () => {
  fs.mkdirSync(path.join(root, "build"), { recursive: true });
  fs.writeFileSync(path.join(root, "build", "build-info.json"), JSON.stringify(info, null, 2) + "\n");
};

if (process.platform !== "linux") {
  info.shm = { built: false, reason: `shared-memory sync is built on Linux only (this is ${process.platform}); ranks on this machine sync over TCP` };
  info.gloo = { built: false, reason: `the Gloo addon is built on Linux only (this is ${process.platform})` };
  writeInfo();
  console.log("distributed: not Linux; no native addons (the cpu sync backend runs over TCP)");
  process.exit(0);
}

const prefixes = [process.env.KILN_GLOO_PREFIX, "/usr", "/usr/local"].filter(Boolean);
const glooPrefix = prefixes.find((p) => fs.existsSync(path.join(p, "include", "gloo", "allreduce.h")) && fs.existsSync(path.join(p, "share", "cmake", "Gloo", "GlooConfig.cmake")));
const cmakeJs = path.join(root, "node_modules", "cmake-js", "bin", "cmake-js");
const jobs = String(Math.max(1, Number(process.env.KILN_BUILD_JOBS) || 2));
const args = [cmakeJs, "compile", "--out", "build", "--parallel", jobs, "--CDCMAKE_BUILD_TYPE=Release", `--CDKILN_GLOO=${glooPrefix ? "ON" : "OFF"}`];
if (glooPrefix) args.push(`--CDCMAKE_PREFIX_PATH=${glooPrefix}`);
const r = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8", maxBuffer: 64 * 2 ** 20 });
fs.mkdirSync(path.join(root, "build"), { recursive: true });
fs.writeFileSync(path.join(root, "build", "build.log"), `${r.stdout ?? ""}\n${r.stderr ?? ""}`);
if (r.status !== 0) {
  const why = "the native addons failed to build; see packages/distributed/build/build.log";
  info.shm = { built: false, reason: why };
  info.gloo = { built: false, reason: why };
  writeInfo();
  console.error(`${r.stdout ?? ""}\n${r.stderr ?? ""}`.split("\n").filter((l) => /error/i.test(l)).slice(0, 30).join("\n"));
  process.exit(1);
}
info.shm = { built: true };
info.gloo = glooPrefix
  ? { built: true, prefix: glooPrefix }
  : { built: false, reason: "Gloo is not installed (no gloo/allreduce.h with its CMake package); install it (Debian/Ubuntu: sudo apt-get install libgloo-dev) and rebuild with 'pnpm --filter @kiln/distributed build'" };
writeInfo();
console.log(`distributed: shared-memory addon built${glooPrefix ? `, Gloo addon built against ${glooPrefix}` : "; Gloo not found, so the gloo sync backend is not built (install libgloo-dev)"}`);
