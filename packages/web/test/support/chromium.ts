import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type BrowserContext, chromium } from "playwright-core";

/** Debian's Chromium (`apt-get install chromium`); never a browser a tool downloads itself. */
export const CHROMIUM_PATH = "/usr/bin/chromium";

/** Why the browser tests cannot run here, or undefined when they can. */
export function chromiumMissingReason(): string | undefined {
  return existsSync(CHROMIUM_PATH) ? undefined : `${CHROMIUM_PATH} is absent: install Debian's Chromium (apt-get install chromium, or tooling/bootstrap.sh as root)`;
}

const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

export interface HeadlessChromium {
  context: BrowserContext;
  close(): Promise<void>;
}

/** Headless Chromium on a fresh profile directory, downloads accepted. */
export async function launchChromium(): Promise<HeadlessChromium> {
  const profile = await mkdtemp(path.join(tmpdir(), "kiln-web-chromium-"));
  try {
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: FLAGS,
      acceptDownloads: true,
      viewport: { width: 1200, height: 860 },
    });
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
