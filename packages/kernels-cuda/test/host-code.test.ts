import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { addonPath } from "../src/native-addon.js";
import { cudaStatus } from "@kiln/kernels-cuda";

// nvcc compiles a host call of a __device__-only function (one it fails to flag,
// e.g. inside a generic lambda) into a stub that calls exit(): the process would
// end without a word at the first launch on a real GPU, which the simulator
// (plain C++) cannot see. No function of the real addon may call exit().
const status = cudaStatus();
const hasObjdump = (() => {
  try {
    execFileSync("objdump", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();
const skip = !status.addon.built ? status.addon.detail : !hasObjdump ? "objdump (binutils) is not installed" : "";

describe.skipIf(skip !== "")(`the real addon's host code${skip ? ` (skipped: ${skip})` : ""}`, () => {
  it("has no function that calls exit()", () => {
    const asm = execFileSync("objdump", ["-d", "--no-show-raw-insn", "-C", addonPath("cuda")], { encoding: "utf8", maxBuffer: 1 << 30 });
    const callers = new Set<string>();
    let current = "";
    for (const line of asm.split("\n")) {
      const fn = /^[0-9a-f]+ <(.*)>:$/.exec(line);
      if (fn) current = fn[1]!;
      else if (/\bcall\b.*<(_?exit)@plt>/.test(line)) callers.add(current);
    }
    expect([...callers]).toEqual([]);
  });
});
