import { type ChildProcess, spawn } from "node:child_process";
import { KILN_BIN } from "./paths.js";

/**
 * Environment that picks the backend for training runs: empty, so the runs use the
 * real CPU (wasm) backend; { KILN_BACKEND: "reference" } would use the f64 reference.
 */
export const BACKEND_ENV: Readonly<Record<string, string>> = {};

export interface KilnOptions {
  /** Working directory of the process (a test's temp folder). */
  cwd: string;
  /** Where $XDG_CACHE_HOME points. */
  cacheDir: string;
  /** Extra environment variables. */
  env?: Record<string, string>;
  /** false: leave the backend to the CLI's own choice (BACKEND_ENV is not applied). */
  pinBackend?: boolean;
  /** A command that runs node in its place (`ip netns exec HOST ...`): its words come first. */
  prefix?: readonly string[];
}

export interface KilnResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A small, explicit environment: nothing from the test runner leaks into the CLI. */
function environment(o: KilnOptions): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: o.cwd,
    XDG_CACHE_HOME: o.cacheDir,
    ...(o.pinBackend === false ? {} : BACKEND_ENV),
    ...o.env,
  };
  if (process.env.TMPDIR) env.TMPDIR = process.env.TMPDIR;
  return env;
}

/** A running `kiln` process, with its output collected as it arrives. */
export class KilnProcess {
  readonly child: ChildProcess;
  stdout = "";
  stderr = "";
  readonly exited: Promise<KilnResult>;
  private readonly waiters = new Set<() => void>();

  constructor(args: readonly string[], o: KilnOptions) {
    const [command, ...rest] = [...(o.prefix ?? []), process.execPath, KILN_BIN, ...args];
    this.child = spawn(command, rest, { cwd: o.cwd, env: environment(o), stdio: ["ignore", "pipe", "pipe"] });
    this.child.stdout!.setEncoding("utf8").on("data", (s: string) => {
      this.stdout += s;
      this.notify();
    });
    this.child.stderr!.setEncoding("utf8").on("data", (s: string) => {
      this.stderr += s;
      this.notify();
    });
    this.exited = new Promise((resolve, reject) => {
      this.child.on("error", reject);
      this.child.on("close", (code, signal) => {
        this.notify();
        resolve({ code, signal, stdout: this.stdout, stderr: this.stderr });
      });
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Complete stdout lines so far. */
  get stdoutLines(): string[] {
    return this.stdout.split("\n").slice(0, -1);
  }

  /** Resolves once `test` holds (checked whenever output arrives); rejects if the process ends first. */
  async until(test: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!test()) {
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        throw new Error(`kiln exited (${this.child.exitCode ?? this.child.signalCode}) before ${what}\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`);
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\nstderr:\n${this.stderr}`);
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, 100);
        this.waiters.add(done);
      });
    }
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }
}

/** Starts `kiln <args>` and returns at once. */
export function startKiln(args: readonly string[], o: KilnOptions): KilnProcess {
  return new KilnProcess(args, o);
}

/** Runs `kiln <args>` to the end. */
export function runKiln(args: readonly string[], o: KilnOptions): Promise<KilnResult> {
  return startKiln(args, o).exited;
}

/** Parses every stdout line as JSON (throws, naming the line, if one is not). */
export function jsonLines(text: string): Record<string, unknown>[] {
  return text
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        throw new Error(`not a JSON line: ${JSON.stringify(l)}`);
      }
    });
}
