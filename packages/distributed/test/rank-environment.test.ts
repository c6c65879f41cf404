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

describe("rankEnvironment (Slurm's variables, as srun sets them for each task)", () => {
  const task = { SLURM_STEP_ID: "0", SLURM_PROCID: "5", SLURM_STEP_NUM_TASKS: "8", SLURM_LOCALID: "1", SLURM_STEP_TASKS_PER_NODE: "4(x2)", SLURM_STEP_NODELIST: "gpu[07-08]", SLURM_JOB_NODELIST: "gpu[07-08],cpu1" };

  it("reads the rank, the world, the node's share and rank 0's host (the step's first node)", () => {
    expect(rankEnvironment(task)).toEqual({ rank: 5, worldSize: 8, localRank: 1, localWorldSize: 4, masterAddr: "gpu07", masterPort: 29500, torchrun: false, launcher: "slurm" });
    expect(rankEnvironment({ ...task, MASTER_ADDR: "10.0.0.9", MASTER_PORT: "31000" })).toMatchObject({ masterAddr: "10.0.0.9", masterPort: 31000 });
    const { SLURM_STEP_NODELIST: _, SLURM_STEP_NUM_TASKS: __, SLURM_STEP_TASKS_PER_NODE: ___, ...job } = task;
    expect(rankEnvironment({ ...job, SLURM_NTASKS: "8", SLURM_TASKS_PER_NODE: "4(x2)" })).toMatchObject({ worldSize: 8, localWorldSize: 4, masterAddr: "gpu07" });
    expect(rankEnvironment({ ...task, SLURM_STEP_NODELIST: "node1,node2" })).toMatchObject({ masterAddr: "node1" });
  });

  it("leaves a batch script's own shell alone (no step), and lets torchrun's variables win", () => {
    expect(rankEnvironment({ SLURM_PROCID: "0", SLURM_NTASKS: "8", SLURM_JOB_NODELIST: "gpu[07-08]" })).toBeUndefined();
    expect(rankEnvironment({ ...task, WORLD_SIZE: "2", RANK: "1" })).toMatchObject({ rank: 1, worldSize: 2 });
  });

  it("names Slurm's variable when one is malformed", () => {
    expect(() => rankEnvironment({ ...task, SLURM_PROCID: "8" })).toThrow(/^SLURM_PROCID=8 is not an integer from 0 to 7/);
    expect(() => rankEnvironment({ ...task, SLURM_STEP_NODELIST: "gpu[a-b]" })).toThrow(/^SLURM_STEP_NODELIST=gpu\[a-b\] is not a Slurm host list/);
    const { SLURM_STEP_NUM_TASKS: _, ...noWorld } = task;
    expect(() => rankEnvironment(noWorld)).toThrow(/neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS/);
  });
});
