// A package as its users get it: `pnpm pack` of a workspace package (its built
// dist/ must be current), installed with npm into a fresh folder holding
// nothing else. npm installs a local tarball offline when it has no registry
// dependencies, which is true of kiln's contract and kernel packages.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";

/**
 * Packs the package in `packageDir` into `destination` and returns the tarball's path.
 * @param {string} packageDir
 * @param {string} destination
 */
export function packPackage(packageDir, destination) {
  fs.mkdirSync(destination, { recursive: true });
  const before = new Set(fs.readdirSync(destination));
  execFileSync("pnpm", ["pack", "--pack-destination", destination], { cwd: packageDir, stdio: "pipe" });
  const tarball = fs.readdirSync(destination).find((f) => f.endsWith(".tgz") && !before.has(f));
  if (!tarball) throw new Error(`pnpm pack in ${packageDir} wrote no new tarball to ${destination}`);
  return path.join(destination, tarball);
}

/**
 * A new folder under the system temp dir with an ES-module package.json and
 * `tarballs` installed by npm, offline. Returns the folder.
 * @param {string} prefix
 * @param {string[]} tarballs
 */
export function installTarballs(prefix, tarballs) {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.writeFileSync(path.join(folder, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  execFileSync("npm", ["install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", ...tarballs], { cwd: folder, stdio: "pipe" });
  return folder;
}

/**
 * Links a package the workspace already has (a bundler, say) into `folder`'s
 * node_modules, so a test needs no registry. `from` is a file inside the
 * workspace whose resolution finds it, as for createRequire.
 * @param {string} folder
 * @param {string} name
 * @param {string} from
 */
export function linkWorkspacePackage(folder, name, from) {
  // The node_modules folders Node would search from `from`, not require.resolve(name + "/package.json"),
  // which a package whose "exports" omit package.json refuses.
  const dirs = createRequire(from).resolve.paths(name) ?? [];
  const found = dirs.map((d) => path.join(d, name)).find((d) => fs.existsSync(path.join(d, "package.json")));
  if (!found) throw new Error(`linkWorkspacePackage: ${name} is not installed where ${from} would find it`);
  const target = path.join(folder, "node_modules", name);
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.symlinkSync(fs.realpathSync(found), target, "dir");
}
