import { ConfigError } from "@kiln/contract";
import { slurmRanks } from "./slurm-environment.js";

/** Where this process stands in a data-parallel run, as torchrun, Slurm or kiln's own launcher tell it through the environment. */
export interface RankEnvironment {
  rank: number;
  worldSize: number;
  /** Rank among the processes on this machine. */
  localRank: number;
  /** Processes of the run on this machine (for the CPU threads each may use). */
  localWorldSize: number;
  /** Where rank 0 listens for the others. */
  masterAddr: string;
  masterPort: number;
  /** Started by torchrun (TORCHELASTIC_RUN_ID is set): its store holds MASTER_PORT, so kiln's rank 0 listens on the next port. */
  torchrun: boolean;
  /** Who set the variables, where it is not WORLD_SIZE and RANK themselves: srun (Slurm's). */
  launcher?: "slurm";
}

export const DEFAULT_MASTER_ADDR = "127.0.0.1";
export const DEFAULT_MASTER_PORT = 29500;

/**
 * Reads torchrun's variables: WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT; without WORLD_SIZE, those srun gives a task of a Slurm
 * step (slurmRanks). Undefined when neither is set (not a rank of a data-parallel
 * run); a ConfigError naming the variable when one is malformed.
 * Under torchrun (TORCHELASTIC_RUN_ID set) the launcher's own store listens on
 * MASTER_PORT, so kiln's rank 0 takes MASTER_PORT + 1, or KILN_MASTER_PORT when set.
 */
export function rankEnvironment(env: Readonly<Record<string, string | undefined>> = process.env): RankEnvironment | undefined {
  if (env.WORLD_SIZE === undefined) {
    const slurm = slurmRanks(env);
    return slurm === undefined ? undefined : { ...ranksOf(slurm.values, slurm.names), launcher: "slurm" };
  }
  return ranksOf(env, {});
}

/** The ranks torchrun's variables in `env` describe; `names` the variables the user set instead, for messages (Slurm's). */
function ranksOf(env: Readonly<Record<string, string | undefined>>, names: Readonly<Record<string, string>>): RankEnvironment {
  const int = (name: string, min: number, max: number, fallback?: number): number => {
    const text = env[name];
    if (text === undefined && fallback !== undefined) return fallback;
    const n = Number(text);
    if (text === undefined || text.trim() === "" || !Number.isSafeInteger(n) || n < min || n > max) {
      const variable = names[name] ?? name;
      throw new ConfigError(`${variable}=${text ?? ""} is not an integer from ${min} to ${max}`, {
        where: variable,
        hint: names[name]
          ? "srun sets SLURM_PROCID (0 to the step's tasks - 1) and SLURM_STEP_NUM_TASKS for each task; start kiln with srun, or set WORLD_SIZE and RANK yourself"
          : "a data-parallel rank needs WORLD_SIZE, RANK (0 to WORLD_SIZE - 1) and MASTER_PORT set as torchrun sets them; or let kiln start the ranks with --ranks N",
      });
    }
    return n;
  };
  const torchrun = env.TORCHELASTIC_RUN_ID !== undefined;
  const worldSize = int("WORLD_SIZE", 1, 65536);
  const rank = int("RANK", 0, worldSize - 1);
  const localWorldSize = int("LOCAL_WORLD_SIZE", 1, worldSize, worldSize);
  return {
    rank,
    worldSize,
    localRank: int("LOCAL_RANK", 0, localWorldSize - 1, rank % localWorldSize),
    localWorldSize,
    masterAddr: env.MASTER_ADDR || DEFAULT_MASTER_ADDR,
    masterPort: torchrun
      ? env.KILN_MASTER_PORT !== undefined
        ? int("KILN_MASTER_PORT", 1, 65535)
        : int("MASTER_PORT", 1, 65534, DEFAULT_MASTER_PORT) + 1
      : int("MASTER_PORT", 1, 65535, DEFAULT_MASTER_PORT),
    torchrun,
  };
}
