// Writes docs/settings.md from core's settings table (run after building @kiln/core).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { settingsMarkdown } from "../packages/core/dist/index.js";

const file = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "docs", "settings.md");
fs.writeFileSync(file, settingsMarkdown());
console.log(`wrote ${path.relative(process.cwd(), file)}`);
