// Preloaded into a kiln process (NODE_OPTIONS=--require): prints its peak RSS on exit.
if (require("node:worker_threads").isMainThread) {
  process.on("exit", () => {
    process.stderr.write(`peak_rss_bytes ${process.resourceUsage().maxRSS * 1024}\n`);
  });
}
