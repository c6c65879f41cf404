import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const SEARCH_DIRS = ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/nvidia/lib64"];

let ldCache: Map<string, string> | undefined;

/** Library file name -> path, from the dynamic linker's cache (empty where ldconfig is missing). */
function linkerCache(): Map<string, string> {
  if (ldCache) return ldCache;
  ldCache = new Map();
  for (const ldconfig of ["/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"]) {
    try {
      const text = execFileSync(ldconfig, ["-p"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
      for (const line of text.split("\n")) {
        const m = /^\s*(\S+) \(.*\) => (.+)$/.exec(line);
        if (m && !ldCache.has(m[1])) ldCache.set(m[1], m[2]);
      }
      break;
    } catch {
      // try the next location
    }
  }
  return ldCache;
}

/**
 * Where the dynamic linker would find one of `names` (e.g. "libcuda.so.1"):
 * LD_LIBRARY_PATH first, then the linker cache, then the usual CUDA folders.
 */
export function findSharedLibrary(names: readonly string[]): string | null {
  const dirs = [...(process.env.LD_LIBRARY_PATH ?? "").split(":").filter(Boolean)];
  for (const name of names) {
    for (const dir of dirs) {
      const p = path.join(dir, name);
      if (fs.existsSync(p)) return p;
    }
    const cached = linkerCache().get(name);
    if (cached) return cached;
    for (const dir of SEARCH_DIRS) {
      const p = path.join(dir, name);
      if (fs.existsSync(p)) return p;
    }
  }
  return null;
}
