export { TrainingRun, type SaveKind, type StepReport, type TrainingRunOptions } from "./training-run.js";
export { KEEP_ALL_SHARE, chooseRunPlan, planRun, type RunPlan, type RunShape } from "./plan-run.js";
export { BestValLoss } from "./best-val-loss.js";
export { evaluate } from "./evaluate.js";
export { formatBytes, threeDigits } from "./format-bytes.js";
export { stepLimit, type StepLimit } from "./step-limit.js";
