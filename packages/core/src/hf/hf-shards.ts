import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import { CheckpointError } from "@kiln/contract";
import { messageOf } from "../fs/errno-table.js";
import { fileReadError } from "../fs/file-errors.js";
import { type SafetensorsReader, openSafetensors } from "../checkpoint/safetensors-reader.js";

export const HF_CONFIG_FILE = "config.json";
export const HF_WEIGHTS_FILE = "model.safetensors";
export const HF_INDEX_FILE = "model.safetensors.index.json";

/** Where each tensor of a Hugging Face folder lies: its open shard (one reader per file). */
export interface HfTensorFiles {
  /** Tensor name -> the reader of the file that holds it. */
  byTensor: Map<string, SafetensorsReader>;
  readers: SafetensorsReader[];
}

/** Reads a JSON file of a model folder; a missing or malformed one is a CheckpointError naming it. */
export async function readJsonFile(file: string, hint: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw fileReadError(err, file, { what: path.basename(file), error: CheckpointError, hints: { ENOENT: hint } });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new CheckpointError(`not valid JSON (${messageOf(err)})`, { where: file, hint: "the file is damaged; download or export the model again" });
  }
}

/**
 * Opens the weights of a model folder: model.safetensors, or the shards that
 * model.safetensors.index.json names. Every shard's header is read and checked
 * here (a truncated shard fails now, naming the file and tensor), and every
 * tensor of the index must be in the shard the index names.
 */
export async function openHfTensorFiles(dir: string): Promise<HfTensorFiles> {
  const indexPath = path.join(dir, HF_INDEX_FILE);
  const single = path.join(dir, HF_WEIGHTS_FILE);
  const readers: SafetensorsReader[] = [];
  const byTensor = new Map<string, SafetensorsReader>();
  try {
    if (await exists(indexPath)) {
      const weightMap = indexWeightMap(await readJsonFile(indexPath, "re-save the model"), indexPath);
      const shards = new Map<string, SafetensorsReader>();
      for (const [tensor, shard] of weightMap) {
        let reader = shards.get(shard);
        if (!reader) {
          const file = path.join(dir, shard);
          if (!(await exists(file))) {
            throw new CheckpointError(`shard ${shard} is missing (the index puts tensor ${tensor} in it)`, { where: indexPath, hint: `download ${shard} into ${dir} again` });
          }
          reader = await openSafetensors(file);
          readers.push(reader);
          shards.set(shard, reader);
        }
        if (!reader.has(tensor)) {
          throw new CheckpointError(`tensor ${tensor} is not in ${shard}, where the index puts it`, { where: reader.path, hint: "the shard and the index do not belong together; download the model again" });
        }
        byTensor.set(tensor, reader);
      }
    } else if (await exists(single)) {
      const reader = await openSafetensors(single);
      readers.push(reader);
      for (const name of reader.names) byTensor.set(name, reader);
    } else {
      const bin = await exists(path.join(dir, "pytorch_model.bin"));
      throw new CheckpointError(`the folder has neither ${HF_WEIGHTS_FILE} nor ${HF_INDEX_FILE}`, {
        where: dir,
        hint: bin ? "kiln reads safetensors weights only; save the model with safe_serialization=True" : "pass a Hugging Face model folder or a kiln .safetensors checkpoint",
      });
    }
  } catch (err) {
    await Promise.all(readers.map((r) => r.close()));
    throw err;
  }
  return { byTensor, readers };
}

function indexWeightMap(json: unknown, file: string): Map<string, string> {
  const map = (json as { weight_map?: unknown } | null)?.weight_map;
  if (typeof map !== "object" || map === null || Array.isArray(map)) {
    throw new CheckpointError("weight_map is missing or not an object", { where: file, hint: "re-save the model; the index maps each tensor name to its shard file" });
  }
  const out = new Map<string, string>();
  for (const [tensor, shard] of Object.entries(map)) {
    if (typeof shard !== "string" || shard === "" || path.basename(shard) !== shard) {
      throw new CheckpointError(`weight_map puts tensor ${tensor} in ${JSON.stringify(shard)}, not a file name in the folder`, { where: file, hint: "re-save the model" });
    }
    out.set(tensor, shard);
  }
  return out;
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}
