import { chromiumMissingReason, launchHeadlessChromium } from "@kiln/tooling/chromium";
import { chromium } from "playwright-core";

export { chromiumMissingReason };
export type HeadlessChromium = Awaited<ReturnType<typeof launchChromium>>;

/** Headless Chromium on a fresh profile directory, downloads accepted. */
export const launchChromium = () => launchHeadlessChromium(chromium, { acceptDownloads: true, viewport: { width: 1200, height: 860 } });
