#!/usr/bin/env node
import { main } from "../main.js";

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`kiln: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(70);
  },
);
