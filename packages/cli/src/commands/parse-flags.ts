import { InvalidArgumentError } from "commander";

/** commander parser for a positive integer flag. */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`expected a positive integer, got "${value}"`);
  return n;
}

export function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`expected an integer >= 0, got "${value}"`);
  return n;
}

export function oneOf<T extends string>(choices: readonly T[]) {
  return (value: string): T => {
    if (!choices.includes(value as T)) throw new InvalidArgumentError(`expected one of ${choices.join(", ")}, got "${value}"`);
    return value as T;
  };
}

/** commander parser for --gpus: GPU ordinals, comma-separated and distinct ("0,1"). */
export function gpuList(value: string): number[] {
  const parts = value.split(",").map((p) => p.trim());
  const ordinals = parts.map(Number);
  if (parts.some((p) => p === "") || ordinals.some((n) => !Number.isSafeInteger(n) || n < 0)) {
    throw new InvalidArgumentError(`expected GPU ordinals separated by commas, e.g. 0,1, got "${value}"`);
  }
  if (new Set(ordinals).size !== ordinals.length) throw new InvalidArgumentError(`each GPU may be named once, got "${value}"`);
  return ordinals;
}
