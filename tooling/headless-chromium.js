// Headless Debian Chromium for the browser tests of every package (playwright-core drives it).
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

/** Debian's Chromium (`apt-get install chromium`); never a browser a tool downloads itself. */
export const CHROMIUM_PATH = "/usr/bin/chromium";

/** Why browser tests cannot run here, or undefined when they can. */
export function chromiumMissingReason() {
  return existsSync(CHROMIUM_PATH) ? undefined : `${CHROMIUM_PATH} is absent: install Debian's Chromium (apt-get install chromium, or tooling/bootstrap.sh as root)`;
}

const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

/**
 * Headless Chromium on a fresh profile directory (Playwright passes it as --user-data-dir),
 * removed on close. `chromium` is the caller's playwright-core export; `options` are added
 * to the persistent context's (downloads, viewport).
 * @param {import("playwright-core").BrowserType} chromium
 * @param {import("playwright-core").BrowserContextOptions} [options]
 * @returns {Promise<{ context: import("playwright-core").BrowserContext, close(): Promise<void> }>}
 */
export async function launchHeadlessChromium(chromium, options = {}) {
  const profile = await mkdtemp(path.join(tmpdir(), "kiln-chromium-"));
  try {
    const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM_PATH, headless: true, args: FLAGS, ...options });
    return {
      context,
      async close() {
        await context.close();
        await rm(profile, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(profile, { recursive: true, force: true });
    throw error;
  }
}
