export type { Communicator } from "./communicator.js";
export { createSingleRankCommunicator } from "./single-rank.js";
