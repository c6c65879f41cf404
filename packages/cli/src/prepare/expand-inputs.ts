import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import { DataError } from "@kiln/contract";

/**
 * The text files named by `inputs`, in order: files as given, directories as
 * every non-hidden file below them (sorted). Missing paths are refused.
 */
export async function expandInputs(inputs: readonly string[]): Promise<string[]> {
  if (inputs.length === 0) {
    throw new DataError("no input given", { where: "-i/--input", hint: "Name text files or directories: kiln prepare -i corpus/*.txt -o data/corpus.bin (or convert a file of 16-bit token ids: kiln prepare --from-u16 train.bin -o data/train.bin)" });
  }
  const files: string[] = [];
  for (const input of inputs) {
    let info;
    try {
      info = await stat(input);
    } catch {
      const pattern = /[*?[]/.test(input);
      throw new DataError("input file not found", {
        where: input,
        hint: pattern ? "The pattern matched no file (the shell passed it on unexpanded); check it." : "Check the path.",
      });
    }
    if (info.isDirectory()) {
      const found = await filesBelow(input);
      if (found.length === 0) throw new DataError("input directory holds no files", { where: input, hint: "Put text files in it, or name the files directly." });
      files.push(...found);
    } else {
      files.push(input);
    }
  }
  return files;
}

async function filesBelow(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const files: string[] = [];
  for (const entry of entries) {
    if (entry.name.startsWith(".")) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) files.push(...(await filesBelow(full)));
    else if (entry.isFile()) files.push(full);
  }
  return files;
}
