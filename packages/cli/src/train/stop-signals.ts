/** The signals that stop a run after its step, and the exit code each run ends with (128 + the signal's number). */
export const STOP_SIGNALS = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 } as const;
export type StopSignal = keyof typeof STOP_SIGNALS;

export interface StopOptions {
  /** Seconds SIGTERM and SIGHUP give the step under way (trainer.stop_grace); Ctrl-C waits, a second one quits. */
  graceSeconds: number;
  say: (line: string) => void;
  /** The line printed when the run quits without saving (a second signal, or the grace period ran out). */
  quitLine: () => string;
}

/**
 * What the stop signals asked of a run. The first signal asks it to stop after the step
 * under way (the caller then saves it and exits with exitCode); a second one, or SIGTERM's
 * grace period running out before the step ends, exits at once: checkpoints are written
 * atomically, so the newest one stays loadable, and the output lock goes on exit.
 */
export class StopSignals {
  /** Runs whose loop is taking the signals now (exitOnStopSignals leaves the signals to them). */
  private static active = 0;
  signal: StopSignal | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly handlers = new Map<StopSignal, () => void>();

  constructor(private readonly o: StopOptions) {
    StopSignals.active++;
    for (const name of Object.keys(STOP_SIGNALS) as StopSignal[]) {
      const handler = () => this.received(name);
      this.handlers.set(name, handler);
      process.on(name, handler);
    }
  }

  /** Whether a run's loop takes the stop signals now. */
  static get running(): boolean {
    return StopSignals.active > 0;
  }

  /** Whether a signal asked the run to stop. */
  get requested(): boolean {
    return this.signal !== undefined;
  }

  /** Another rank was stopped (ranks stop after the same step): stop here too, with its code. */
  stopAsOthers(signal: StopSignal): void {
    this.signal ??= signal;
  }

  /** The exit code of a stopped run: 128 + the signal's number. */
  get exitCode(): number {
    return this.signal === undefined ? 0 : STOP_SIGNALS[this.signal];
  }

  /** The loop has ended (the step finished): the grace period no longer runs; what follows is the save. */
  stepsOver(): void {
    clearTimeout(this.timer);
  }

  dispose(): void {
    StopSignals.active--;
    clearTimeout(this.timer);
    for (const [name, handler] of this.handlers) process.off(name, handler);
  }

  private received(name: StopSignal): void {
    if (this.signal !== undefined) this.quit(name, `${name} again`);
    this.signal = name;
    if (name === "SIGINT") {
      this.o.say("stopping after this step (Ctrl-C again to quit at once)");
      return;
    }
    const grace = this.o.graceSeconds;
    this.o.say(`${name}: stopping after this step, saving it and exiting; if the step takes over ${grace} s (trainer.stop_grace) it is not saved (a second signal quits at once)`);
    this.timer = setTimeout(() => this.quit(name, `the step did not end within ${grace} s of ${name} (trainer.stop_grace)`), grace * 1000);
    this.timer.unref();
  }

  private quit(name: StopSignal, why: string): never {
    this.o.say(`${why}: quitting without saving the step under way; ${this.o.quitLine()}`);
    process.exit(STOP_SIGNALS[this.signal ?? name]);
  }
}

/**
 * Before and after the training loop (opening data and device, writing final weights), a
 * stop signal exits at once with its code, through process.exit, so that exit handlers
 * (the output lock's) run; while a StopSignals takes them it is left to that. Returns the remover.
 */
export function exitOnStopSignals(): () => void {
  const handlers = (Object.keys(STOP_SIGNALS) as StopSignal[]).map((name) => {
    const handler = () => {
      if (StopSignals.running) return;
      process.exit(STOP_SIGNALS[name]);
    };
    process.on(name, handler);
    return [name, handler] as const;
  });
  return () => {
    for (const [name, handler] of handlers) process.off(name, handler);
  };
}
