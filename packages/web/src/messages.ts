// What the page and its training worker say to each other (postMessage).

/** The training text: kiln's built-in story corpus, or a text file given to the page. */
export type DataChoice = { kind: "builtin" } | { kind: "text"; name: string; text: string };

export interface SampleRequest {
  prompt: string;
  maxTokens: number;
  temperature: number;
  topK: number;
  seed: number;
}

export type ToWorker =
  | { type: "start"; config: string; steps?: number; data: DataChoice }
  | { type: "pause" }
  | { type: "resume" }
  | { type: "sample"; request: SampleRequest }
  | { type: "checkpoint" }
  | { type: "load"; name: string; bytes: Uint8Array; data: DataChoice };

/** One log interval, with the CLI's metric names. */
export interface MetricsLine {
  step: number;
  loss: number;
  grad_norm: number;
  learning_rate: number;
  "tokens/s": number;
}

export type RunState = "idle" | "preparing" | "training" | "paused" | "done" | "loaded";

export type FromWorker =
  | { type: "device"; name: string; threads: number; isolated: boolean; why: string }
  | { type: "state"; state: RunState; step: number; maxSteps: number }
  | { type: "log"; text: string }
  | { type: "metrics"; line: MetricsLine }
  | { type: "val"; step: number; val_loss: number }
  | { type: "sample"; text: string; tokens: number[] }
  | { type: "checkpoint"; name: string; bytes: Uint8Array }
  | { type: "error"; name: string; message: string; where?: string; hint?: string };
