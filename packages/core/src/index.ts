export * from "./checkpoint/index.js";
