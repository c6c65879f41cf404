import { InvalidArgumentError } from "commander";

// KB, MB, ... are powers of 1000; KiB, MiB, ... and the bare K, M, G, T (as `free -g` and `ls -h` use them) powers of 1024.
const UNITS: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  k: 2 ** 10,
  kib: 2 ** 10,
  m: 2 ** 20,
  mib: 2 ** 20,
  g: 2 ** 30,
  gib: 2 ** 30,
  t: 2 ** 40,
  tib: 2 ** 40,
};

/** commander parser for a memory size with its unit: "24GiB", "80GB", "16G", "1.5 TiB". */
export function parseByteSize(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$/i.exec(text);
  const scale = m ? UNITS[m[2].toLowerCase()] : undefined;
  if (!m || scale === undefined) {
    throw new InvalidArgumentError(`expected a size with its unit, such as 24GiB, 80GB or 16G, got "${text}"`);
  }
  const bytes = Math.round(Number(m[1]) * scale);
  if (bytes <= 0) throw new InvalidArgumentError(`expected a size above 0, got "${text}"`);
  return bytes;
}
