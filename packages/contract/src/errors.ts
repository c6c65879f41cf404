/**
 * Errors a user can cause. Each says what was wrong, where (file, key, line,
 * value) and what to do about it; `toString()` prints all three.
 */
export interface KilnErrorDetails {
  /** Where it happened: a file path, a config key, `file:line`, a kernel name. */
  where?: string;
  /** What to do about it. */
  hint?: string;
  cause?: unknown;
}

/** Where an error records its kinds, shared by every copy of this module (a bundled backend carries its own). */
const KINDS = Symbol.for("kiln.error.kinds");

export class KilnError extends Error {
  /** The kind this class stands for; `instanceof` compares kinds, not class identity. */
  static readonly kind: string = "KilnError";
  readonly where: string | undefined;
  readonly hint: string | undefined;
  /** Process exit code the CLI uses for this class of error. */
  readonly exitCode: number = 1;

  constructor(message: string, details: KilnErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    const kinds: string[] = [];
    for (let c = new.target as unknown as { kind?: string } | null; c && c.kind; c = Object.getPrototypeOf(c)) kinds.push(c.kind);
    Object.defineProperty(this, KINDS, { value: kinds });
    this.name = kinds[0];
    this.where = details.where;
    this.hint = details.hint;
  }

  /** True for errors of this kind made by any copy of this module. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    const kinds = (value as { [KINDS]?: string[] } | null)?.[KINDS];
    return Array.isArray(kinds) && kinds.includes(this.kind);
  }

  /** One readable block: "ConfigError in models/nano.yaml (model.hidden_size): ... \n  what to do: ..." */
  describe(): string {
    const where = this.where ? ` in ${this.where}` : "";
    const hint = this.hint ? `\n  what to do: ${this.hint}` : "";
    return `${this.name}${where}: ${this.message}${hint}`;
  }
}

/** A config file or flag is wrong: unknown key, wrong type, out of range, inconsistent. */
export class ConfigError extends KilnError {
  static override readonly kind: string = "ConfigError";
}

/** Training or token data is missing, malformed, or inconsistent with the model. */
export class DataError extends KilnError {
  static override readonly kind: string = "DataError";
}

/** A request does not fit in (device) memory, or would pass an address-space limit. */
export class MemoryError extends KilnError {
  static override readonly kind: string = "MemoryError";
}

/** The device asked for is missing or unusable (no CUDA driver, no GPU, kernel missing). */
export class DeviceError extends KilnError {
  static override readonly kind: string = "DeviceError";
}

/** A checkpoint is missing, corrupt, or does not match the model. */
export class CheckpointError extends KilnError {
  static override readonly kind: string = "CheckpointError";
}

/** Training cannot go on as asked: the loss or the gradients became NaN or infinite. */
export class TrainingError extends KilnError {
  static override readonly kind: string = "TrainingError";
}

/** A kernel was called with arguments that break its contract (shapes, dtypes, bounds). */
export class KernelArgumentError extends KilnError {
  static override readonly kind: string = "KernelArgumentError";
}
