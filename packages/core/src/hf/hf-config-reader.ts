import { CheckpointError } from "@kiln/contract";

export type Json = Record<string, unknown>;

/**
 * Typed reads of one config.json's keys: each failure names the file and the key, says
 * what is wrong and what to do (a CheckpointError).
 */
export class HfConfigReader {
  constructor(
    readonly json: Json,
    readonly file: string,
  ) {}

  fail(key: string, what: string, hint: string): never {
    throw new CheckpointError(what, { where: `${this.file} (${key})`, hint });
  }

  /** Whether the key holds a value (not missing, not null). */
  has(key: string): boolean {
    return this.json[key] !== undefined && this.json[key] !== null;
  }

  int(key: string, fallback?: number): number {
    const v = this.json[key] ?? fallback;
    if (v === undefined) return this.fail(key, `${key} is missing`, "a config.json written by transformers has it; add it or re-save the model");
    if (!Number.isSafeInteger(v) || (v as number) < 1) return this.fail(key, `${key} is ${JSON.stringify(v)}, not a positive integer`, "fix the value in config.json");
    return v as number;
  }

  num(key: string, fallback: number): number {
    const v = this.json[key] ?? fallback;
    if (typeof v !== "number" || !(v > 0)) return this.fail(key, `${key} is ${JSON.stringify(v)}, not a positive number`, "fix the value in config.json");
    return v;
  }

  bool(key: string, fallback: boolean): boolean {
    const v = this.json[key] ?? fallback;
    return typeof v === "boolean" ? v : this.fail(key, `${key} is ${JSON.stringify(v)}, not true or false`, "fix the value in config.json");
  }

  /** Refuses the model unless the key is `wanted` (or missing with `fallback` equal to it). */
  expect(key: string, wanted: unknown, fallback: unknown, why: string): void {
    const v = this.json[key] ?? fallback;
    if (v !== wanted) this.fail(key, `${key} is ${JSON.stringify(v)}; kiln only trains ${key} ${JSON.stringify(wanted)} (${why})`, "kiln cannot represent this model; pick a model without this setting");
  }

  /** An object-valued key, or undefined when missing or null. */
  object(key: string): Json | undefined {
    const v = this.json[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "object" || Array.isArray(v)) return this.fail(key, `${key} is ${JSON.stringify(v)}, not an object`, "fix the value in config.json");
    return v as Json;
  }
}
