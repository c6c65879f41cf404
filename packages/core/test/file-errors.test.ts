import { describe, expect, it } from "vitest";
import { CheckpointError, DataError, KilnError } from "@kiln/contract";
import { ERRNO_TABLE, fileReadError, fileWriteError } from "../src/index.js";

const systemError = (code: string, message = `${code}: failed`) => Object.assign(new Error(message), { code });

describe("the errno table", () => {
  it("gives a hint with every meaning it words", () => {
    for (const [code, m] of Object.entries(ERRNO_TABLE)) {
      expect(m.read === undefined, `${code}: read and readHint`).toBe(m.readHint === undefined);
      expect(m.write === undefined, `${code}: write and writeHint`).toBe(m.writeHint === undefined);
      expect(m.read ?? m.write, code).toBeDefined();
    }
  });

  it("words the disk errors a writer meets", () => {
    for (const code of ["ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "ENOENT", "ENOTDIR", "EISDIR", "EIO", "EMFILE"]) expect(ERRNO_TABLE[code]?.write, code).toBeDefined();
  });
});

describe("fileReadError", () => {
  it("says what the file is and what the code means, with the caller's error class", () => {
    const err = fileReadError(systemError("ENOENT"), "data/x.bin", { what: "token file", error: DataError });
    expect(err).toBeInstanceOf(DataError);
    expect(err).toMatchObject({ message: "token file not found", where: "data/x.bin", hint: "Check the path." });
    expect(err.cause).toMatchObject({ code: "ENOENT" });
    expect(fileReadError(systemError("EACCES"), "f", { what: "tokenizer" }).message).toBe("tokenizer is not readable (permission denied)");
  });

  it("takes the caller's hint for a code, and adds `after` to any hint", () => {
    const ctx = { what: "checkpoint file", error: CheckpointError, hints: { ENOENT: "List the folder." }, after: "Then run again." };
    expect(fileReadError(systemError("ENOENT"), "f", ctx).hint).toBe("List the folder. Then run again.");
    expect(fileReadError(systemError("EISDIR"), "f", ctx).hint).toBe("Give the path of a file, not a directory. Then run again.");
  });

  it("reports a code the table does not know with the system's message", () => {
    const err = fileReadError(systemError("EWHATEVER", "EWHATEVER: strange"), "f", { what: "input file" });
    expect(err.message).toBe("cannot read input file (EWHATEVER: strange)");
    expect(err.hint).toBe("Check that the file exists and is readable.");
  });

  it("passes a KilnError through unchanged", () => {
    const own = new DataError("the input holds no text");
    expect(fileReadError(own, "f", { what: "input file" })).toBe(own);
    expect(fileWriteError(own, "f", { what: "input file" })).toBe(own);
  });
});

describe("fileWriteError", () => {
  it("says why the write failed, as `cannot <doing>: <why>`", () => {
    const full = fileWriteError(systemError("ENOSPC"), "out/m.safetensors", { what: "checkpoint file", error: CheckpointError });
    expect(full).toBeInstanceOf(CheckpointError);
    expect(full).toMatchObject({ message: "cannot write checkpoint file: disk full while writing", hint: "Free disk space, or write to another disk." });
    const made = fileWriteError(systemError("EROFS"), "out", { what: "the output directory", doing: "create the output directory" });
    expect(made).toBeInstanceOf(KilnError);
    expect(made.message).toBe("cannot create the output directory: output directory is on a read-only file system");
  });
});
