// The ready configs of the repository's models/ folder, bundled into the page as text.
import benchTiny from "../../../models/bench-tiny.yaml?raw";
import nanoStart from "../../../models/nano-start.yaml?raw";
import nano from "../../../models/nano.yaml?raw";

export const PRESETS: Record<string, string> = {
  "nano-start": nanoStart,
  nano,
  "bench-tiny": benchTiny,
};

export const DEFAULT_PRESET = "nano-start";
