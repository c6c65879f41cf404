import cliProgress from "cli-progress";
import type { TokenizeProgress } from "@kiln/core";

export interface PrepareProgress {
  update(progress: TokenizeProgress): void;
  stop(): void;
}

const mb = (bytes: number) => (bytes / 1e6).toFixed(1);

/** A progress bar on a terminal; otherwise one plain line when tokenizing starts. */
export function prepareProgress(stream: NodeJS.WriteStream, fileCount: number, bytesTotal: number, tokenizer: string): PrepareProgress {
  const what = `tokenizing ${fileCount} file${fileCount === 1 ? "" : "s"} (${mb(bytesTotal)} MB) with ${tokenizer}`;
  if (!stream.isTTY) {
    stream.write(`kiln prepare: ${what}\n`);
    return { update: () => undefined, stop: () => undefined };
  }
  const bar = new cliProgress.SingleBar(
    {
      stream,
      format: "tokenizing |{bar}| {percentage}% | {done}/{all} MB | {tokens} tokens | eta {eta_formatted}",
      hideCursor: true,
      clearOnComplete: false,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(Math.max(bytesTotal, 1), 0, { done: mb(0), all: mb(bytesTotal), tokens: 0 });
  return {
    update: (p) => bar.update(p.bytesRead, { done: mb(p.bytesRead), all: mb(p.bytesTotal), tokens: p.tokens.toLocaleString("en-US") }),
    stop: () => bar.stop(),
  };
}
