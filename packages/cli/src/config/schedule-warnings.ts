/**
 * A warning when warmup lasts as long as the run or longer: the learning rate then never
 * reaches trainer.learning_rate and the schedule's decay never starts. Undefined otherwise.
 */
export function warmupWarning(warmupSteps: number, totalSteps: number): string | undefined {
  if (warmupSteps === 0 || warmupSteps < totalSteps) return undefined;
  return (
    `warning: warmup_steps (${warmupSteps}) >= the ${totalSteps} steps this run trains for: the learning rate never reaches ` +
    `trainer.learning_rate and never decays; lower trainer.warmup_steps (--warmup-steps), e.g. to ${Math.max(1, Math.round(totalSteps / 10))}`
  );
}
