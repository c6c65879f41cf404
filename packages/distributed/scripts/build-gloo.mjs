#!/usr/bin/env node
// Builds build/Release/kiln_gloo.node (the `gloo` sync backend) with cmake-js when
// Gloo is installed (Debian: libgloo-dev). Without it the build says so in
// build/build-info.json, which the package reports at run time, and succeeds:
// the other sync backends do not need it.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const writeInfo = (info) => {
  fs.mkdirSync(path.join(root, "build"), { recursive: true });
  fs.writeFileSync(path.join(root, "build", "build-info.json"), JSON.stringify(info, null, 2) + "\n");
};

const prefixes = [process.env.KILN_GLOO_PREFIX, "/usr", "/usr/local"].filter(Boolean);
const prefix = prefixes.find((p) => fs.existsSync(path.join(p, "include", "gloo", "allreduce.h")) && fs.existsSync(path.join(p, "share", "cmake", "Gloo", "GlooConfig.cmake")));
if (!prefix) {
  writeInfo({ built: false, reason: "Gloo is not installed (no gloo/allreduce.h with its CMake package); install it (Debian/Ubuntu: sudo apt-get install libgloo-dev) and rebuild with 'pnpm --filter @kiln/distributed build'" });
  console.log("distributed: Gloo not found; the gloo sync backend is not built (install libgloo-dev)");
  process.exit(0);
}
const cmakeJs = path.join(root, "node_modules", "cmake-js", "bin", "cmake-js");
const jobs = String(Math.max(1, Number(process.env.KILN_BUILD_JOBS) || 2));
const r = spawnSync(process.execPath, [cmakeJs, "compile", "--out", "build", "--parallel", jobs, `--CDCMAKE_PREFIX_PATH=${prefix}`, "--CDCMAKE_BUILD_TYPE=Release"], {
  cwd: root,
  encoding: "utf8",
  maxBuffer: 64 * 2 ** 20,
});
fs.mkdirSync(path.join(root, "build"), { recursive: true });
fs.writeFileSync(path.join(root, "build", "build.log"), `${r.stdout ?? ""}\n${r.stderr ?? ""}`);
if (r.status !== 0) {
  writeInfo({ built: false, reason: "the Gloo addon failed to build; see packages/distributed/build/build.log" });
  console.error(`${r.stdout ?? ""}\n${r.stderr ?? ""}`.split("\n").filter((l) => /error/i.test(l)).slice(0, 30).join("\n"));
  process.exit(1);
}
writeInfo({ built: true, prefix });
console.log(`distributed: Gloo addon built against ${prefix}`);
