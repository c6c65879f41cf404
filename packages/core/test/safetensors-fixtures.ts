// Helpers that build safetensors bytes by hand, independent of the writer under test.
import { expect } from "vitest";
import { CheckpointError } from "@kiln/contract";
import { safetensorsDTypeSize, type SafetensorsHeader } from "../src/index.js";

const encoder = new TextEncoder();

/** 8-byte little-endian length + header text (padded with `pad` spaces) + data. */
export function rawSafetensors(header: unknown, data: Uint8Array = new Uint8Array(0), pad = 0): Uint8Array {
  const text = typeof header === "string" ? header : JSON.stringify(header);
  const json = encoder.encode(text + " ".repeat(pad));
  return concat(u64le(json.byteLength), json, data);
}

export function u64le(n: number | bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(n), true);
  return out;
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/** Deterministic pseudo-random bytes (xorshift32). */
export function patternBytes(length: number, seed = 1): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** Runs `fn`; passes if it returns, or throws a CheckpointError. Anything else fails the test. */
export function parsesOrThrowsCheckpointError<T>(fn: () => T): T | CheckpointError {
  try {
    return fn();
  } catch (err) {
    if (!(err instanceof CheckpointError)) throw new Error(`expected a CheckpointError, got ${String(err)}`, { cause: err });
    expect(err.where).toBeTruthy();
    expect(err.hint).toBeTruthy();
    return err;
  }
}

/** Asserts what a parsed header promises: tensors tile the data buffer exactly, sizes agree. */
export function expectConsistentHeader(header: SafetensorsHeader, fileSize: number): void {
  expect(header.dataStart).toBe(8 + header.headerLength);
  expect(header.dataStart + header.dataLength).toBe(fileSize);
  // Checked in plain code and reported together: one expect per tensor would cost
  // seconds on a header of 50 000 tensors.
  const wrong: string[] = [];
  let cursor = 0;
  for (const [name, info] of header.tensors) {
    const elements = info.shape.reduce((n, d) => n * d, 1);
    if (info.name !== name) wrong.push(`${name}: info.name is ${info.name}`);
    if (name.length === 0) wrong.push("a tensor with an empty name");
    if (info.byteLength !== elements * safetensorsDTypeSize(info.dtype)) wrong.push(`${name}: byteLength ${info.byteLength} for ${elements} ${info.dtype} elements`);
    if (info.dataOffsets[0] !== cursor) wrong.push(`${name}: starts at ${info.dataOffsets[0]}, the previous tensor ends at ${cursor}`);
    if (info.dataOffsets[1] - info.dataOffsets[0] !== info.byteLength) wrong.push(`${name}: offsets ${info.dataOffsets.join("..")} for ${info.byteLength} bytes`);
    cursor = info.dataOffsets[1];
  }
  expect(wrong).toEqual([]);
  expect(cursor).toBe(header.dataLength);
  for (const value of Object.values(header.metadata)) expect(typeof value).toBe("string");
}
