import type { Communicator } from "./communicator.js";

/** The communicator of a run with one rank: every collective leaves the values as they are. */
export function createSingleRankCommunicator(): Communicator {
  return {
    rank: 0,
    worldSize: 1,
    kind: "single",
    dataPath: "nothing (one rank)",
    allReduce: async () => {},
    broadcast: async () => {},
    reduceScatter: async () => {},
    allGather: async () => {},
    allReduceScalars: async (values) => values.slice(),
    barrier: async () => {},
    close: async () => {},
  };
}
