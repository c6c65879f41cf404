import { chromiumMissingReason, launchHeadlessChromium } from "@kiln/tooling/chromium";
import { chromium } from "playwright-core";

export { chromiumMissingReason };
export type HeadlessChromium = Awaited<ReturnType<typeof launchChromium>>;

/** Headless Chromium on a fresh profile directory. */
export const launchChromium = () => launchHeadlessChromium(chromium);
