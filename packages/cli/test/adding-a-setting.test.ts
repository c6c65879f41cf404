import { Command } from "commander";
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";

// A new trainer setting is one entry in core's table: here one is added (one that may come:
// a time limit after which a run saves and stops), and it reaches the YAML, a flag,
// --help, the resolved settings, the docs' table and the web page's list of what it leaves aside.
vi.mock("../../core/src/settings/trainer-settings.ts", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../core/src/settings/trainer-settings.ts")>();
  const { setting } = await import("../../core/src/settings/setting.ts");
  return {
    ...original,
    TRAINER_SETTINGS: {
      ...original.TRAINER_SETTINGS,
      time_limit: setting("timeLimit", z.number().positive().default(60), { help: "minutes after which a run saves and stops", flag: "--time-limit <minutes>" }),
    },
  };
});

const { NOT_ON_PAGE, parseConfigText, resolveSettings, settingsMarkdown } = await import("@kiln/core");
const { trainOptions } = await import("../src/commands/train.js");
const { settingOverrides } = await import("../src/config/setting-flags.js");

const CONFIG = "model: { arch: gpt2, vocab_size: 256, hidden_size: 16, num_layers: 1, num_heads: 2, max_seq_len: 16 }\ntrainer: { max_steps: 4, time_limit: 30 }\n";

describe("a setting added to the table", () => {
  it("is read from the YAML and set by its flag, which --help lists", () => {
    const settings = (args: string[]) => {
      const cmd = trainOptions(new Command("train")).exitOverride();
      cmd.parse(["-f", "t.yaml", ...args], { from: "user" });
      return { help: cmd.helpInformation(), s: resolveSettings(parseConfigText(CONFIG, "t.yaml"), settingOverrides("train", cmd.opts())) as unknown as Record<string, unknown> };
    };
    expect(settings([]).s.timeLimit).toBe(30);
    expect(settings(["--time-limit", "5"]).s.timeLimit).toBe(5);
    expect(settings(["--time_limit", "7"]).s.timeLimit).toBe(7);
    expect(() => settings(["--time-limit", "-1"])).toThrow(/expected a number > 0 \(as trainer\.time_limit takes\)/);
    expect(settings([]).help.replace(/\s+/g, " ")).toContain("--time-limit <minutes> minutes after which a run saves and stops (trainer.time_limit)");
  });

  it("is in the docs' table and in the web page's list of settings it leaves aside", () => {
    expect(settingsMarkdown()).toMatch(/^\| `time_limit` \| a number > 0 \| `60` \| `--time-limit` \(train\) \| minutes after which a run saves and stops\. Not read by the web page\. \|/m);
    expect(NOT_ON_PAGE).toContain("trainer.time_limit");
  });
});
