import { describe } from "vitest";
import type { oracle } from "../../src/oracle/index.js";

/** The hand-computed cases of one oracle kernel (oracle-hand*.test.ts; their coverage is checked by name in oracle-hand.test.ts). */
export function kernel(name: keyof typeof oracle, body: () => void): void {
  describe(name, body);
}
