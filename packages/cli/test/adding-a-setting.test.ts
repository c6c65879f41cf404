import { Command } from "commander";
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";

// A new trainer setting is one entry in core's table: here one is added (a real one to come:
// how long a stopped run may take to finish its step), and it reaches the YAML, a flag,
// --help, the resolved settings, the docs' table and the web page's list of what it leaves aside.
vi.mock("../../core/src/settings/trainer-settings.ts", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../core/src/settings/trainer-settings.ts")>();
  const { setting } = await import("../../core/src/settings/setting.ts");
  return {
    ...original,
    TRAINER_SETTINGS: {
      ...original.TRAINER_SETTINGS,
      stop_grace: setting("stopGrace", z.number().positive().default(60), { help: "seconds a stopped run may take to finish its step", flag: "--stop-grace <seconds>" }),
    },
  };
});

const { NOT_ON_PAGE, parseConfigText, resolveSettings, settingsMarkdown } = await import("@kiln/core");
const { trainOptions } = await import("../src/commands/train.js");
const { settingOverrides } = await import("../src/config/setting-flags.js");

const CONFIG = "model: { arch: gpt2, vocab_size: 256, hidden_size: 16, num_layers: 1, num_heads: 2, max_seq_len: 16 }\ntrainer: { max_steps: 4, stop_grace: 30 }\n";

describe("a setting added to the table", () => {
  it("is read from the YAML and set by its flag, which --help lists", () => {
    const settings = (args: string[]) => {
      const cmd = trainOptions(new Command("train")).exitOverride();
      cmd.parse(["-f", "t.yaml", ...args], { from: "user" });
      return { help: cmd.helpInformation(), s: resolveSettings(parseConfigText(CONFIG, "t.yaml"), settingOverrides("train", cmd.opts())) as unknown as Record<string, unknown> };
    };
    expect(settings([]).s.stopGrace).toBe(30);
    expect(settings(["--stop-grace", "5"]).s.stopGrace).toBe(5);
    expect(settings(["--stop_grace", "7"]).s.stopGrace).toBe(7);
    expect(() => settings(["--stop-grace", "-1"])).toThrow(/expected a number > 0 \(as trainer\.stop_grace takes\)/);
    expect(settings([]).help.replace(/\s+/g, " ")).toContain("--stop-grace <seconds> seconds a stopped run may take to finish its step (trainer.stop_grace)");
  });

  it("is in the docs' table and in the web page's list of settings it leaves aside", () => {
    expect(settingsMarkdown()).toMatch(/^\| `stop_grace` \| a number > 0 \| `60` \| `--stop-grace` \(train\) \| seconds a stopped run may take to finish its step\. Not read by the web page\. \|/m);
    expect(NOT_ON_PAGE).toContain("trainer.stop_grace");
  });
});
