import { describe, expect, it } from "vitest";
import { ConfigError } from "@kiln/contract";
import { rankEnvironment } from "@kiln/distributed";

describe("rankEnvironment (torchrun's variables)", () => {
  it("is undefined outside a data-parallel run", () => {
    expect(rankEnvironment({})).toBeUndefined();
  });

  it("reads every variable, with torchrun's defaults for the optional ones", () => {
    expect(rankEnvironment({ WORLD_SIZE: "4", RANK: "3", MASTER_PORT: "1234" })).toEqual({ rank: 3, worldSize: 4, localRank: 3, localWorldSize: 4, masterAddr: "127.0.0.1", masterPort: 1234, torchrun: false });
    expect(rankEnvironment({ WORLD_SIZE: "4", RANK: "3", LOCAL_WORLD_SIZE: "2", MASTER_ADDR: "node0" })).toMatchObject({ localRank: 1, localWorldSize: 2, masterAddr: "node0", masterPort: 29500 });
  });

  it("under torchrun (TORCHELASTIC_RUN_ID), listens past the port its store holds: MASTER_PORT + 1, or KILN_MASTER_PORT", () => {
    const torchrun = { WORLD_SIZE: "2", RANK: "0", MASTER_ADDR: "10.1.0.1", MASTER_PORT: "29400", TORCHELASTIC_RUN_ID: "none" };
    expect(rankEnvironment(torchrun)).toMatchObject({ masterAddr: "10.1.0.1", masterPort: 29401, torchrun: true });
    expect(rankEnvironment({ ...torchrun, KILN_MASTER_PORT: "31000" })).toMatchObject({ masterPort: 31000 });
    expect(() => rankEnvironment({ ...torchrun, KILN_MASTER_PORT: "x" })).toThrow(/^KILN_MASTER_PORT=x is not an integer from 1 to 65535/);
  });

  it.each([
    [{ WORLD_SIZE: "2" }, /^RANK= is not an integer from 0 to 1/],
    [{ WORLD_SIZE: "2", RANK: "2" }, /^RANK=2 is not an integer from 0 to 1/],
    [{ WORLD_SIZE: "two", RANK: "0" }, /^WORLD_SIZE=two is not an integer from 1 to 65536/],
    [{ WORLD_SIZE: "2", RANK: "0", MASTER_PORT: "0" }, /^MASTER_PORT=0 is not an integer from 1 to 65535/],
  ])("refuses %j, naming the variable", (env, message) => {
    expect(() => rankEnvironment(env)).toThrow(ConfigError);
    expect(() => rankEnvironment(env)).toThrow(message);
  });
});
