import { describe, expect, it, vi } from "vitest";
import { main } from "@kiln/cli";
import { ConfigError } from "@kiln/contract";
import { parseConfigText } from "@kiln/core";

async function run(argv: string[]) {
  let out = "";
  let err = "";
  const o = vi.spyOn(process.stdout, "write").mockImplementation((s) => ((out += String(s)), true));
  const e = vi.spyOn(process.stderr, "write").mockImplementation((s) => ((err += String(s)), true));
  try {
    const code = await main(argv);
    return { code, out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
    process.exitCode = undefined;
  }
}

/** The whole output of a refused command line: exit 1, nothing on stdout, exactly these two lines on stderr. */
async function expectMessage(argv: string[], where: string, what: string, hint: string) {
  const r = await run(argv);
  expect(r.code).toBe(1);
  expect(r.out).toBe("");
  expect(r.err).toBe(`kiln: ConfigError in ${where}: ${what}\n  what to do: ${hint}\n`);
}

describe("a bad flag prints one error, a did-you-mean and where the help is (not the help itself)", () => {
  it("a misspelt flag", async () => {
    await expectMessage(["train", "-f", "x.yaml", "--learnin-rate", "3e-4"], "--learnin-rate", "kiln train has no option --learnin-rate", "did you mean --learning-rate? (see kiln train --help)");
    await expectMessage(["train", "-f", "x.yaml", "--max-step=5"], "--max-step", "kiln train has no option --max-step", "did you mean --max-steps? (see kiln train --help)");
  });

  it("a misspelt flag with underscores", async () => {
    await expectMessage(["train", "-f", "x.yaml", "--batch_sise", "4"], "--batch_sise", "kiln train has no option --batch_sise", "did you mean --batch-size? (see kiln train --help)");
  });

  it("takes underscores and other trainers' names as kiln's flags (the run then stops at the missing config file)", async () => {
    for (const flag of ["--batch_size", "--logging-steps", "--logging_steps", "--eval-steps", "--max-length", "--save-steps", "--gradient-accumulation-steps"]) {
      await expectMessage(["train", "-f", "x.yaml", flag, "10"], "x.yaml", "the config file does not exist", "check the path given to -f (relative to the folder kiln runs in); kiln's repository has ready configs in its models/ folder");
    }
  });

  it("another trainer's name for a setting the command does not take", async () => {
    await expectMessage(["estimate", "-f", "x.yaml", "--logging-steps", "10"], "--logging-steps", "kiln estimate has no option --logging-steps", "kiln sets it in the config file as trainer.log_interval (see kiln estimate --help)");
  });

  it("a model setting, which lives in the config file", async () => {
    await expectMessage(["train", "-f", "x.yaml", "--n-layer", "4"], "--n-layer", "kiln train has no option --n-layer", "kiln sets it in the config file as model.num_layers (see kiln train --help)");
  });

  it("a flag nothing is close to", async () => {
    await expectMessage(["train", "-f", "x.yaml", "--zzzzzz"], "--zzzzzz", "kiln train has no option --zzzzzz", "see kiln train --help");
  });

  it("a value the key does not take", async () => {
    await expectMessage(["train", "-f", "x.yaml", "--batch-size", "0"], "--batch-size", 'expected an integer > 0 (as trainer.batch_size takes), got "0"', "see kiln train --help");
    await expectMessage(["train", "-f", "x.yaml", "--lr-schedule", "cosin"], "--lr-schedule", 'expected one of cosine, linear, constant (as trainer.lr_schedule takes), got "cosin"', "see kiln train --help");
  });

  it("a flag without its value", async () => {
    await expectMessage(["train", "-f", "x.yaml", "--batch-size"], "--batch-size", "option '--batch-size <n>' argument missing", "see kiln train --help");
  });

  it("the config without -f", async () => {
    await expectMessage(["train", "models/nano.yaml"], "models/nano.yaml", "kiln train needs the config file after -f", "kiln train -f models/nano.yaml (see kiln train --help)");
    await expectMessage(["train"], "-f", "kiln train needs a config file", "pass -f config.yaml (kiln's repository has ready ones in its models/ folder), or --init-from PATH to take the model from trained weights with default trainer settings");
  });

  it("names the command whose flag it was", async () => {
    await expectMessage(["estimate", "-f", "x.yaml", "--devic", "h100"], "--devic", "kiln estimate has no option --devic", "did you mean --device? (see kiln estimate --help)");
    await expectMessage(["estimate", "-f", "x.yaml", "--device-memory", "24"], "--device-memory", 'expected a size with its unit, such as 24GiB, 80GB or 16G, got "24"', "see kiln estimate --help");
  });

  it("a misspelt command", async () => {
    await expectMessage(["trian", "-f", "x.yaml"], "kiln", "kiln has no command trian", "did you mean kiln train? (see kiln --help)");
  });

  it("prints help only when asked, and exits 0", async () => {
    const r = await run(["train", "--help"]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/--learning-rate <lr>\s+peak learning rate \(trainer\.learning_rate; also\s+--lr\)/);
    expect(r.out).toMatch(/--max-checkpoints <n>\s+keep only the newest N step checkpoints\s+\(trainer\.max_checkpoints\)/);
  });
});

describe("a config key from another trainer is answered with kiln's key", () => {
  const model = "model: { arch: gpt2, vocab_size: 256, hidden_size: 16, num_layers: 1, num_heads: 2, max_seq_len: 16 }\n";
  const refusal = (text: string) => {
    try {
      parseConfigText(text, "t.yaml");
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return err as ConfigError;
    }
    throw new Error("expected a ConfigError");
  };

  it("logging_steps, eval_steps (not the nearer-looking eval_iters), max_length", () => {
    for (const [name, key] of [
      ["logging_steps", "log_interval"],
      ["eval_steps", "eval_interval"],
      ["max_length", "seq_len"],
    ]) {
      const e = refusal(`${model}trainer:\n  max_steps: 4\n  ${name}: 10\n`);
      expect(e.where).toBe("t.yaml:4");
      expect(e.message).toBe(`unknown key trainer.${name} (line 4); kiln calls it trainer.${key}`);
      expect(e.hint).toBe(`rename trainer.${name} to trainer.${key}`);
    }
  });

  it("a kiln key in the wrong section", () => {
    const e = refusal(`${model}trainer:\n  max_steps: 4\n  num_heads: 2\n`);
    expect(e.message).toBe("unknown key trainer.num_heads (line 4); kiln calls it model.num_heads");
    expect(e.hint).toBe("move it to the model: section as num_heads");
  });

  it("a typo still gets its did-you-mean", () => {
    expect(refusal(`${model}trainer:\n  max_step: 4\n`).message).toBe("unknown key trainer.max_step (line 3); did you mean trainer.max_steps?");
  });
});
