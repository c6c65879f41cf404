import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { createInterface } from "node:readline";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { DataError } from "@kiln/contract";
import { decompress as zstdDecompress } from "fzstd";
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects } from "hyparquet";
import { fileReadError } from "../../fs/file-errors.js";

/** One row of an example file and where it is, for messages: `chat.jsonl:12`, `rows.json [3]`, `rows.parquet row 7`. */
export interface ExampleRow {
  value: unknown;
  where: string;
}

/** The file kinds `kiln prepare` reads examples from, by their name's ending. */
export const EXAMPLE_FILE_ENDINGS = [".jsonl", ".json", ".parquet"] as const;

export function isExampleFile(file: string): boolean {
  return EXAMPLE_FILE_ENDINGS.some((e) => file.toLowerCase().endsWith(e));
}

const INPUT = { what: "example file", error: DataError };

/** Parquet codecs beyond hyparquet's own (snappy, uncompressed), from Node's zlib and fzstd. */
const COMPRESSORS = {
  GZIP: (input: Uint8Array) => new Uint8Array(gunzipSync(input)),
  BROTLI: (input: Uint8Array) => new Uint8Array(brotliDecompressSync(input)),
  ZSTD: (input: Uint8Array) => zstdDecompress(input),
};

/** The rows of a JSON Lines file (one JSON value a line; blank lines skipped), a JSON array, or a Parquet file, in order. */
export async function* readExampleRows(file: string): AsyncGenerator<ExampleRow> {
  const name = path.basename(file);
  const lower = file.toLowerCase();
  if (lower.endsWith(".jsonl")) {
    const lines = createInterface({ input: createReadStream(file, { encoding: "utf8" }), crlfDelay: Infinity });
    let n = 0;
    try {
      for await (const line of lines) {
        n++;
        if (line.trim() === "") continue;
        yield { value: parseJson(line, `${file}:${n}`), where: `${name}:${n}` };
      }
    } catch (err) {
      throw err instanceof DataError ? err : fileReadError(err, file, INPUT);
    }
    return;
  }
  if (lower.endsWith(".json")) {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      throw fileReadError(err, file, INPUT);
    }
    const value = parseJson(text, file);
    if (!Array.isArray(value)) throw new DataError("a JSON example file holds an array of rows", { where: file, hint: "Write the rows as [{...}, {...}], or one a line in a .jsonl file." });
    for (const [i, row] of value.entries()) yield { value: row, where: `${name} [${i}]` };
    return;
  }
  if (lower.endsWith(".parquet")) {
    yield* parquetRows(file, name);
    return;
  }
  throw new DataError("not an example file: kiln prepare reads examples from .jsonl, .json and .parquet files", { where: file, hint: "Rename the file to what it holds, or leave --format out to tokenize it as text." });
}

async function* parquetRows(file: string, name: string): AsyncGenerator<ExampleRow> {
  let rows: Record<string, unknown>[];
  try {
    const buffer = await asyncBufferFromFile(file);
    const metadata = await parquetMetadataAsync(buffer);
    rows = await parquetReadObjects({ file: buffer, metadata, compressors: COMPRESSORS });
  } catch (err) {
    if ((err as { code?: unknown }).code !== undefined) throw fileReadError(err, file, INPUT);
    throw new DataError(`cannot read the Parquet file (${err instanceof Error ? err.message : String(err)})`, {
      where: file,
      hint: "Write it again with pyarrow or pandas (snappy, gzip, brotli, zstd or no compression), or convert it to JSON Lines.",
    });
  }
  for (const [i, row] of rows.entries()) yield { value: row, where: `${name} row ${i + 1}` };
}

function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new DataError(`not valid JSON (${err instanceof Error ? err.message : String(err)})`, { where, hint: "Each row is one JSON object; in a .jsonl file, one a line." });
  }
}
