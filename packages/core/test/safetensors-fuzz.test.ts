// Property tests: whatever bytes the parser is given, it either returns a
// header that keeps every promise of the format or throws a CheckpointError,
// and it does so quickly.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CheckpointError } from "@kiln/contract";
import {
  SAFETENSORS_DTYPES,
  decodeSafetensors,
  encodeSafetensors,
  parseSafetensorsHeader,
  safetensorsDTypeSize,
  type SafetensorsHeader,
  type SafetensorsTensorInput,
} from "../src/index.js";
import { concat, expectConsistentHeader, parsesOrThrowsCheckpointError, rawSafetensors, u64le } from "./safetensors-fixtures.js";

const RUNS = 400;
const MAX_MS_PER_PARSE = 5000;

/**
 * Parses within the time bound (a generous one: it catches a parser that goes
 * quadratic or hangs, not a slow machine); returns the header, or the CheckpointError.
 */
function checkParse(bytes: Uint8Array) {
  const start = performance.now();
  const result = parsesOrThrowsCheckpointError(() => parseSafetensorsHeader(bytes, { fileName: "fuzz.safetensors" }));
  expect(performance.now() - start).toBeLessThan(MAX_MS_PER_PARSE);
  if (!(result instanceof CheckpointError)) expectConsistentHeader(result, bytes.byteLength);
  return result;
}

const anyDType = fc.constantFrom(...SAFETENSORS_DTYPES);
const tensorName = fc.oneof(fc.string({ minLength: 1, maxLength: 12 }), fc.constantFrom("model.embed_tokens.weight", "__proto__", "a"));

/** A valid list of tensors with small shapes (including scalars and zero-size). */
const validTensors = fc
  .uniqueArray(
    fc.record({
      name: tensorName,
      dtype: anyDType,
      shape: fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 }),
      seed: fc.integer({ min: 1, max: 255 }),
    }),
    { selector: (t) => t.name, maxLength: 6 },
  )
  .filter((ts) => ts.every((t) => t.name !== "__metadata__"))
  .map((ts): SafetensorsTensorInput[] =>
    ts.map(({ name, dtype, shape, seed }) => {
      const bytes = shape.reduce((n, d) => n * d, 1) * safetensorsDTypeSize(dtype);
      return { name, dtype, shape, data: new Uint8Array(bytes).map((_, i) => (seed * (i + 1)) & 0xff) };
    }),
  );

const metadata = fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 3 });

/** A valid file split into its header object and its data buffer, ready to be mutated. */
const validParts = fc.tuple(validTensors, metadata).map(([tensors, meta]) => {
  const bytes = encodeSafetensors(tensors, meta);
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))) as Record<string, any>;
  return { header, data: bytes.subarray(8 + n) };
});

type Parts = { header: Record<string, any>; data: Uint8Array };
const tensorKeys = (h: Record<string, any>) => Object.keys(h).filter((k) => k !== "__metadata__");

/** Ways to damage a valid header or file; each returns the bytes to parse. */
const mutation = fc.oneof(
  fc.record({ kind: fc.constant("shift-offset"), which: fc.nat(), end: fc.boolean(), delta: fc.integer({ min: -9, max: 9 }) }),
  fc.record({ kind: fc.constant("change-shape"), which: fc.nat(), dim: fc.oneof(fc.integer({ min: -3, max: 9 }), fc.double(), fc.constant(2 ** 60)) }),
  fc.record({ kind: fc.constant("change-dtype"), which: fc.nat(), dtype: fc.oneof(anyDType, fc.string({ maxLength: 6 })) }),
  fc.record({ kind: fc.constant("overlap"), which: fc.nat() }),
  fc.record({ kind: fc.constant("trailing-bytes"), extra: fc.integer({ min: 1, max: 9 }) }),
  fc.record({ kind: fc.constant("truncate"), cut: fc.nat() }),
  fc.record({ kind: fc.constant("header-length"), length: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }) }),
  fc.record({ kind: fc.constant("flip-byte"), at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant("replace-entry"), which: fc.nat(), value: fc.jsonValue({ maxDepth: 2 }) }),
  fc.record({ kind: fc.constant("metadata"), value: fc.jsonValue({ maxDepth: 2 }) }),
);

function applyMutation({ header, data }: Parts, m: any): Uint8Array {
  const names = tensorKeys(header);
  const pick = (i: number) => (names.length > 0 ? header[names[i % names.length]!] : undefined);
  switch (m.kind) {
    case "shift-offset": {
      const t = pick(m.which);
      if (t) t.data_offsets[m.end ? 1 : 0] += m.delta;
      return rawSafetensors(header, data);
    }
    case "change-shape": {
      const t = pick(m.which);
      if (t) t.shape = t.shape.length > 0 ? [m.dim, ...t.shape.slice(1)] : [m.dim];
      return rawSafetensors(header, data);
    }
    case "change-dtype": {
      const t = pick(m.which);
      if (t) t.dtype = m.dtype;
      return rawSafetensors(header, data);
    }
    case "overlap": {
      const t = pick(m.which);
      const first = pick(0);
      if (t && first && t !== first) t.data_offsets = [...first.data_offsets];
      return rawSafetensors(header, data);
    }
    case "trailing-bytes":
      return rawSafetensors(header, concat(data, new Uint8Array(m.extra)));
    case "truncate": {
      const whole = rawSafetensors(header, data);
      return whole.subarray(0, m.cut % (whole.byteLength + 1));
    }
    case "header-length": {
      const whole = rawSafetensors(header, data);
      whole.set(u64le(m.length), 0);
      return whole;
    }
    case "flip-byte": {
      const whole = rawSafetensors(header, data);
      if (whole.byteLength > 0) whole[m.at % whole.byteLength] = m.value;
      return whole;
    }
    case "replace-entry": {
      if (names.length > 0) header[names[m.which % names.length]!] = m.value;
      return rawSafetensors(header, data);
    }
    case "metadata":
      header.__metadata__ = m.value;
      return rawSafetensors(header, data);
  }
  throw new Error(`unknown mutation ${m.kind}`);
}

describe("safetensors parser under malformed input", () => {
  it("random bytes", () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 256 }), (bytes) => void checkParse(bytes)), { numRuns: RUNS });
  });

  it("random bytes behind a plausible header length", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 256 }), fc.nat(), fc.boolean(), (body, n, brace) => {
        const header = brace && body.byteLength > 0 ? concat(new Uint8Array([0x7b]), body.subarray(1)) : body;
        checkParse(concat(u64le(n % (header.byteLength + 3)), header));
      }),
      { numRuns: RUNS },
    );
  });

  it("random JSON as the header, with random data after it", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.uint8Array({ maxLength: 32 }), fc.nat({ max: 7 }), (value, data, pad) => {
        checkParse(rawSafetensors(JSON.stringify(value) ?? "null", data, pad));
      }),
      { numRuns: RUNS },
    );
  });

  it("header-shaped objects with random field values", () => {
    const field = fc.oneof(fc.integer({ min: -2, max: 16 }), fc.double(), fc.string({ maxLength: 3 }), fc.constant(null));
    const entryArb = fc.record(
      {
        dtype: fc.oneof(anyDType, fc.string({ maxLength: 5 }), field),
        shape: fc.oneof(fc.array(fc.oneof(fc.integer({ min: -1, max: 4 }), field), { maxLength: 3 }), field),
        data_offsets: fc.oneof(fc.tuple(fc.integer({ min: -1, max: 24 }), fc.integer({ min: -1, max: 24 })), fc.array(field, { maxLength: 3 })),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 4 }), entryArb, { maxKeys: 4 }), fc.nat({ max: 24 }), (header, size) => {
        checkParse(rawSafetensors(header, new Uint8Array(size)));
      }),
      { numRuns: RUNS },
    );
  });

  it("valid files parse, and decode to exactly what was encoded", () => {
    fc.assert(
      fc.property(validTensors, metadata, (tensors, meta) => {
        const bytes = encodeSafetensors(tensors, meta);
        const header = checkParse(bytes);
        expect(header).not.toBeInstanceOf(CheckpointError);
        const decoded = decodeSafetensors(bytes);
        expect(decoded.metadata).toEqual(meta);
        for (const t of tensors) {
          const got = decoded.tensors.get(t.name)!;
          expect(got.dtype).toBe(t.dtype);
          expect(got.shape).toEqual(t.shape);
          expect(Array.from(got.data)).toEqual(Array.from(t.data as Uint8Array));
        }
      }),
      { numRuns: RUNS },
    );
  });

  it("mutated valid files: shifted offsets, changed shapes and dtypes, overlaps, trailing bytes, truncation, huge lengths", () => {
    fc.assert(
      fc.property(validParts, mutation, (parts, m) => void checkParse(applyMutation(parts, m))),
      { numRuns: RUNS * 3 },
    );
  });

  it("mutations that always break the format are always refused", () => {
    fc.assert(
      fc.property(validParts, fc.integer({ min: 1, max: 9 }), fc.nat(), (parts, extra, cut) => {
        expect(checkParse(rawSafetensors(parts.header, concat(parts.data, new Uint8Array(extra))))).toBeInstanceOf(CheckpointError);
        const whole = rawSafetensors(parts.header, parts.data);
        expect(checkParse(whole.subarray(0, cut % whole.byteLength))).toBeInstanceOf(CheckpointError);
      }),
      { numRuns: RUNS },
    );
  });

  it("large and deeply nested headers are handled within the time bound", () => {
    const deep = rawSafetensors(`{"a":${"[".repeat(1_000_000)}${"]".repeat(1_000_000)}}`);
    const refused = checkParse(deep);
    expect(refused).toBeInstanceOf(CheckpointError);
    expect((refused as CheckpointError).message).toMatch(/nests objects or arrays deeper than 16 levels/);
    // Brackets and escaped quotes inside names are not nesting.
    const bracketed = [{ name: `${"[".repeat(40)}\\"{${"{".repeat(40)}`, dtype: "U8" as const, shape: [1], data: new Uint8Array([7]) }];
    expect(checkParse(encodeSafetensors(bracketed))).not.toBeInstanceOf(CheckpointError);

    const count = 50_000;
    const many = Array.from({ length: count }, (_, i) => ({ name: `t${i}`, dtype: "U8" as const, shape: [1], data: new Uint8Array([i & 0xff]) }));
    const parsed = checkParse(encodeSafetensors(many));
    expect(parsed).not.toBeInstanceOf(CheckpointError);
    expect((parsed as SafetensorsHeader).tensors.size).toBe(count);
  });
});
