import { describe, expect, it } from "vitest";
import { CheckpointError, ConfigError, KilnError } from "@kiln/contract";

describe("KilnError", () => {
  it("describes what, where and what to do", () => {
    const e = new ConfigError("hidden_size 100 is not divisible by num_heads 3", { where: "models/x.yaml (model.hidden_size)", hint: "use 99" });
    expect(e.describe()).toBe("ConfigError in models/x.yaml (model.hidden_size): hidden_size 100 is not divisible by num_heads 3\n  what to do: use 99");
    expect(e.name).toBe("ConfigError");
  });

  it("answers instanceof by kind, also for errors made by another copy of the module", () => {
    // A second copy, as a bundled backend carries: same kinds, different classes.
    class OtherKilnError extends Error {
      static readonly kind: string = "KilnError";
    }
    const foreign = new OtherKilnError("x");
    Object.defineProperty(foreign, Symbol.for("kiln.error.kinds"), { value: ["CheckpointError", "KilnError"] });
    expect(foreign instanceof KilnError).toBe(true);
    expect(foreign instanceof CheckpointError).toBe(true);
    expect(foreign instanceof ConfigError).toBe(false);
    expect(new ConfigError("y") instanceof KilnError).toBe(true);
    expect(new ConfigError("y") instanceof CheckpointError).toBe(false);
    expect(new Error("z") instanceof KilnError).toBe(false);
  });
});
