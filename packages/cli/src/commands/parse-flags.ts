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
