// Makes a kernel package's dist/types stand alone: the declarations tsc wrote import "@kiln/contract",
// which the package's users need not have installed. The contract's declarations
// those imports reach are copied into dist/types/contract/ and the imports point there.
import fs from "node:fs";
import path from "node:path";

const CONTRACT = /(["'])@kiln\/contract\1/g;
const RELATIVE = /(?:from\s+|import\s*\(\s*)["'](\.{1,2}\/[^"']+)\.js["']/g;
const SOURCE_MAP = /^\/\/# sourceMappingURL=.*$/m;

/**
 * @param {string} typesDir  dist/types of this package (flat: one file per source module)
 * @param {string} contractDist  @kiln/contract's built dist/
 */
export function copyContractTypes(typesDir, contractDist) {
  for (const f of fs.readdirSync(typesDir).filter((f) => f.endsWith(".d.ts"))) {
    const file = path.join(typesDir, f);
    fs.writeFileSync(file, fs.readFileSync(file, "utf8").replace(CONTRACT, '"./contract/index.js"'));
  }
  const outDir = path.join(typesDir, "contract");
  fs.rmSync(outDir, { recursive: true, force: true });
  const pending = ["index.d.ts"];
  const copied = new Set();
  while (pending.length > 0) {
    const rel = pending.pop();
    if (copied.has(rel)) continue;
    copied.add(rel);
    const from = path.join(contractDist, rel);
    if (!fs.existsSync(from)) throw new Error(`standalone-types: ${from} is missing: build @kiln/contract first`);
    const text = fs.readFileSync(from, "utf8").replace(SOURCE_MAP, "");
    for (const m of text.matchAll(RELATIVE)) pending.push(path.join(path.dirname(rel), `${m[1]}.d.ts`));
    fs.mkdirSync(path.dirname(path.join(outDir, rel)), { recursive: true });
    fs.writeFileSync(path.join(outDir, rel), text);
  }
}
