import { ConfigError } from "@kiln/contract";

/**
 * The first host of a Slurm hostlist expression: "gpu[07-10,12],cpu3" -> "gpu07",
 * "node1,node2" -> "node1". The bracket's first range keeps its zero padding.
 */
export function firstSlurmHost(list: string, variable: string): string {
  const m = /^([^,[\]]+)(?:\[([^\]]*)\])?/.exec(list.trim());
  const first = m?.[2]?.split(",")[0]?.split("-")[0];
  if (!m || (m[2] !== undefined && !/^\d+$/.test(first ?? ""))) {
    throw new ConfigError(`${variable}=${list} is not a Slurm host list`, { where: variable, hint: "set MASTER_ADDR to the host of rank 0 (srun sets the host list as host[1-4] or host1,host2)" });
  }
  return m[1] + (first ?? "");
}

/** Tasks per node from Slurm's "4(x2),3" form: the first node's count. */
function firstNodeTasks(text: string | undefined): number | undefined {
  const m = text === undefined ? null : /^(\d+)/.exec(text);
  return m ? Number(m[1]) : undefined;
}

/**
 * What srun tells each task of a step: SLURM_PROCID (the rank), SLURM_STEP_NUM_TASKS or
 * SLURM_NTASKS (the world), SLURM_LOCALID and SLURM_STEP_TASKS_PER_NODE (on this node),
 * and rank 0's host, the first of SLURM_STEP_NODELIST or SLURM_JOB_NODELIST, unless
 * MASTER_ADDR names it. Only inside a step (SLURM_STEP_ID set): a batch script's own shell
 * carries SLURM_PROCID too and is no rank. Undefined outside a step.
 */
export function slurmRanks(env: Readonly<Record<string, string | undefined>>): { values: Record<string, string>; names: Record<string, string> } | undefined {
  const step = env.SLURM_STEP_ID ?? env.SLURM_STEPID;
  if (step === undefined || env.SLURM_PROCID === undefined) return undefined;
  const world = env.SLURM_STEP_NUM_TASKS ?? env.SLURM_NTASKS;
  if (world === undefined) throw new ConfigError("SLURM_PROCID is set but neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS", { where: "SLURM_NTASKS", hint: "start kiln with srun, which sets them, or set WORLD_SIZE and RANK yourself" });
  const perNode = firstNodeTasks(env.SLURM_STEP_TASKS_PER_NODE ?? env.SLURM_TASKS_PER_NODE);
  const nodes = env.SLURM_STEP_NODELIST ?? env.SLURM_JOB_NODELIST ?? env.SLURM_NODELIST;
  const master = env.MASTER_ADDR ?? (nodes === undefined ? undefined : firstSlurmHost(nodes, env.SLURM_STEP_NODELIST ? "SLURM_STEP_NODELIST" : env.SLURM_JOB_NODELIST ? "SLURM_JOB_NODELIST" : "SLURM_NODELIST"));
  const values = {
    WORLD_SIZE: world,
    RANK: env.SLURM_PROCID,
    ...(env.SLURM_LOCALID !== undefined ? { LOCAL_RANK: env.SLURM_LOCALID } : {}),
    ...(perNode !== undefined ? { LOCAL_WORLD_SIZE: String(perNode) } : {}),
    ...(master !== undefined ? { MASTER_ADDR: master } : {}),
    ...(env.MASTER_PORT !== undefined ? { MASTER_PORT: env.MASTER_PORT } : {}),
  };
  // The variable each value came from, for messages.
  const names = {
    WORLD_SIZE: env.SLURM_STEP_NUM_TASKS !== undefined ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS",
    RANK: "SLURM_PROCID",
    LOCAL_RANK: "SLURM_LOCALID",
    LOCAL_WORLD_SIZE: env.SLURM_STEP_TASKS_PER_NODE !== undefined ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE",
  };
  return { values, names };
}
