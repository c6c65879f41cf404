import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { PACKAGE_ROOT } from "./sim-toolchain.js";

const SOURCE = path.join(PACKAGE_ROOT, "test", "support", "fake_nccl.c");

/** Why fakes cannot be built here (no C compiler), or undefined. */
export function fakeNcclSkipReason(): string | undefined {
  const r = spawnSync("sh", ["-c", "command -v cc"], { encoding: "utf8" });
  return r.status === 0 ? undefined : "no C compiler (cc) to build the fake NCCL with";
}

export interface FakeNcclOptions {
  /** NCCL's version code: 23007 is 2.30.7, 20900 is 2.9.0, 2804 is 2.8.4 (the old encoding). */
  version?: number;
  withoutAsyncError?: boolean;
  /** A file the fake appends one line per call to. */
  log?: string;
  failEnqueue?: boolean;
  /** After a collective, ncclCommGetAsyncError reports: "hang" ncclInProgress for ever, "remote" ncclRemoteError. */
  async?: "hang" | "remote";
  /** How long a rank waits for the others, to join or at a collective (default 60 s). */
  waitSeconds?: number;
}

/** Compiles test/support/fake_nccl.c with these knobs into `dir`/`name`; returns the file. */
export function buildFakeNccl(dir: string, name: string, o: FakeNcclOptions = {}): string {
  const out = path.join(dir, name);
  const defines = [`-DFAKE_NCCL_VERSION=${o.version ?? 23007}`];
  if (o.withoutAsyncError) defines.push("-DFAKE_NCCL_WITHOUT_ASYNC_ERROR");
  if (o.log) defines.push(`-DFAKE_NCCL_LOG=${JSON.stringify(o.log)}`);
  if (o.failEnqueue) defines.push("-DFAKE_NCCL_FAIL_ENQUEUE");
  if (o.waitSeconds !== undefined) defines.push(`-DFAKE_NCCL_WAIT_SECONDS=${o.waitSeconds}`);
  if (o.async) defines.push(`-DFAKE_NCCL_ASYNC=${o.async === "hang" ? 1 : 2}`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const r = spawnSync("cc", ["-shared", "-fPIC", "-O1", "-Wall", "-Werror", ...defines, "-o", out, SOURCE, "-lrt"], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`building the fake NCCL failed:\n${r.stderr}`);
  return out;
}
