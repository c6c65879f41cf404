/**
 * JSON.parse silently keeps the last of two equal keys in an object. This scan
 * finds the first such repeat in text that JSON.parse has already accepted, in
 * one linear pass, so a header that names a tensor twice can be refused.
 */

export interface DuplicateJsonKey {
  /** The repeated key. */
  key: string;
  /** Keys of the enclosing objects, outermost first (`[]` stands for an array). */
  path: string[];
}

interface Frame {
  keys: Set<string> | null; // null for an array
  name: string; // key this container sits under in its parent
  lastKey: string;
}

/** The first repeated key in any object of `json` (which must be valid JSON), or undefined. */
export function findDuplicateJsonKey(json: string): DuplicateJsonKey | undefined {
  const stack: Frame[] = [];
  const n = json.length;
  let i = 0;
  while (i < n) {
    const c = json.charCodeAt(i);
    if (c === 0x22 /* " */) {
      let j = i + 1;
      let escaped = false;
      while (j < n) {
        const d = json.charCodeAt(j);
        if (d === 0x5c /* \ */) {
          escaped = true;
          j += 2;
        } else if (d === 0x22) break;
        else j++;
      }
      const top = stack[stack.length - 1];
      if (top?.keys && isFollowedByColon(json, j + 1)) {
        const key = escaped ? (JSON.parse(json.slice(i, j + 1)) as string) : json.slice(i + 1, j);
        if (top.keys.has(key)) return { key, path: stack.slice(1).map((f) => f.name) };
        top.keys.add(key);
        top.lastKey = key;
      }
      i = j + 1;
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const parent = stack[stack.length - 1];
      const name = parent === undefined ? "" : parent.keys ? parent.lastKey : "[]";
      stack.push({ keys: c === 0x7b ? new Set() : null, name, lastKey: "" });
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
    }
    i++;
  }
  return undefined;
}

function isFollowedByColon(json: string, from: number): boolean {
  for (let k = from; k < json.length; k++) {
    const c = json.charCodeAt(k);
    if (c === 0x3a /* : */) return true;
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return false;
  }
  return false;
}
