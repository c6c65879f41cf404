export type { Communicator, SyncBackendKind } from "./communicator.js";
export { createSingleRankCommunicator } from "./single-rank.js";
export { createCpuCommunicator, DEFAULT_SYNC_TIMEOUT_S, type CpuCommunicatorOptions } from "./cpu-communicator.js";
export { rankEnvironment, DEFAULT_MASTER_ADDR, DEFAULT_MASTER_PORT, type RankEnvironment } from "./rank-environment.js";
export { launchRanks, type LaunchOptions } from "./launch-ranks.js";
export { freePort } from "./free-port.js";
export { createGlooCommunicator, type GlooCommunicatorOptions } from "./gloo-communicator.js";
export { glooStatus, type GlooStatus } from "./native-addons.js";
export { sharedMemoryStatus, type AddonStatus } from "./native-addons.js";
