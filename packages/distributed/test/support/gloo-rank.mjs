// One rank of a Gloo group in its own process (the tests kill it): joins, answers
// one all-reduce, prints "ready", then waits for a collective that never comes.
import { createReferenceBackend } from "@kiln/contract";
import { createGlooCommunicator } from "../../dist/index.js";

const [rank, worldSize, port, timeoutMs] = process.argv.slice(2).map(Number);
const comm = await createGlooCommunicator({ rank, worldSize, host: "127.0.0.1", port, timeoutMs });
const backend = createReferenceBackend();
const buffer = backend.alloc(16);
backend.upload({ buffer, byteOffset: 0 }, Float32Array.of(1, 2, 3, 4));
await comm.allReduce(backend, { buffer, byteOffset: 0 }, 4, "f32", "sum");
console.log("ready");
setInterval(() => undefined, 1000);
