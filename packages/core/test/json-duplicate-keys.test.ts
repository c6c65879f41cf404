import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { findDuplicateJsonKey } from "../src/checkpoint/json-duplicate-keys.js";

describe("findDuplicateJsonKey", () => {
  it("finds repeats at any depth and reports where", () => {
    expect(findDuplicateJsonKey('{"a":1,"b":2,"a":3}')).toEqual({ key: "a", path: [] });
    expect(findDuplicateJsonKey('{"a":{"x":[{"k":1,"k":2}]}}')).toEqual({ key: "k", path: ["a", "x", "[]"] });
    expect(findDuplicateJsonKey('{"a\\"b":1, "a\\u0022b" :2}')).toEqual({ key: 'a"b', path: [] });
  });

  it("does not confuse string values, array items or sibling objects with keys", () => {
    expect(findDuplicateJsonKey('{"a":"a","b":["a","a"],"c":{"a":1},"d":{"a":2}}')).toBeUndefined();
    expect(findDuplicateJsonKey('{"a":"{\\"a\\":1,\\"a\\":2}"}')).toBeUndefined();
  });

  it("finds nothing in JSON.stringify output, and finds a key appended a second time", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 }), { minKeys: 1 }), (obj) => {
        const json = JSON.stringify(obj);
        expect(findDuplicateJsonKey(json)).toBeUndefined();
        const key = Object.keys(obj)[0]!;
        const repeated = `${json.slice(0, -1)},${JSON.stringify(key)}:null}`;
        expect(findDuplicateJsonKey(repeated)?.key).toBe(key);
      }),
      { numRuns: 300 },
    );
  });
});
