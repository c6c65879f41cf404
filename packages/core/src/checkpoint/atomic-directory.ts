import { mkdir, readdir, rename, rm } from "node:fs/promises";
import path from "node:path";
import { CheckpointError } from "@kiln/contract";
import { errorCode, stagingPathFor, syncDirectory } from "../fs/durable-write.js";
import { directoryError, syncDirectoryOrFail, writeError } from "./atomic-file.js";

/**
 * Writes a folder that appears whole or not at all: `fill` writes into a
 * staging folder beside the target (`.<name>.<pid>.<random>.tmp`), which is
 * fsynced and renamed to the target; then the parent is fsynced. On failure
 * the staging folder is removed. The target must not exist, or be empty; missing
 * parents are created.
 * `fill` should write its files durably (writeFileAtomically, writeSafetensors).
 */
export async function writeDirectoryAtomically(target: string, fill: (dir: string) => Promise<void>): Promise<void> {
  const absolute = path.resolve(target);
  await refuseNonEmpty(absolute, target);
  const parent = path.dirname(absolute);
  const staging = stagingPathFor(absolute);
  try {
    await mkdir(parent, { recursive: true });
    await mkdir(staging);
  } catch (err) {
    throw directoryError(err, parent);
  }
  try {
    await fill(staging);
    await syncDirectory(staging, ["EINVAL", "ENOTSUP", "EISDIR"]);
    await rename(staging, absolute);
  } catch (err) {
    await rm(staging, { recursive: true, force: true }).catch(() => undefined);
    if (errorCode(err) === "ENOTEMPTY" || errorCode(err) === "EEXIST") throw notEmpty(target);
    throw writeError(err, absolute);
  }
  await syncDirectoryOrFail(parent);
}

async function refuseNonEmpty(absolute: string, target: string): Promise<void> {
  let entries: string[];
  try {
    entries = await readdir(absolute);
  } catch (err) {
    if (errorCode(err) === "ENOENT") return;
    if (errorCode(err) === "ENOTDIR") throw new CheckpointError("the output path is a file", { where: target, hint: "name a new folder to write into" });
    throw writeError(err, absolute);
  }
  if (entries.length > 0) throw notEmpty(target);
}

function notEmpty(target: string): CheckpointError {
  return new CheckpointError("the output folder already exists and is not empty", { where: target, hint: "name a new folder, or remove this one first" });
}
