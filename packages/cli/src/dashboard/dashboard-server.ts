import { readFileSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { ConfigError } from "@kiln/contract";
import { metricsFileOf } from "../plot/run-metrics.js";
import { MetricsTail } from "./metrics-tail.js";
import { dashboardHtml } from "./page-html.js";

export interface DashboardOptions {
  /** A kiln train output folder (or its metrics.jsonl). */
  run: string;
  runName: string;
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** How often metrics.jsonl is checked for new lines. */
  pollMs?: number;
  warn?: (message: string) => void;
}

export interface Dashboard {
  url: string;
  close(): Promise<void>;
}

/** Browsers may ask only for these: the page's script and chart option (built next to this file) and ECharts from its npm package. */
function staticFiles(): Map<string, { body: Buffer; type: string }> {
  const js = "text/javascript; charset=utf-8";
  const read = (url: URL | string) => readFileSync(url);
  return new Map([
    ["/dashboard/page.js", { body: read(new URL("./page.js", import.meta.url)), type: js }],
    ["/plot/chart-option.js", { body: read(new URL("../plot/chart-option.js", import.meta.url)), type: js }],
    ["/vendor/echarts.min.js", { body: read(createRequire(import.meta.url).resolve("echarts/dist/echarts.min.js")), type: js }],
  ]);
}

// Nothing but this server: no script, style sheet, font or connection elsewhere.
const SECURITY_HEADERS = {
  "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'",
  "X-Content-Type-Options": "nosniff",
};

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);

function isLoopback(host: string): boolean {
  return LOOPBACK_NAMES.has(host) || host.startsWith("127.");
}

/** On a loopback address, only requests addressed to a loopback name (a web page elsewhere cannot rebind its name to it). */
function hostAllowed(req: http.IncomingMessage, boundHost: string): boolean {
  if (!isLoopback(boundHost)) return true;
  const header = req.headers.host ?? "";
  const name = header.startsWith("[") ? header.slice(0, header.indexOf("]") + 1) : header.split(":")[0];
  return isLoopback(name);
}

/** Serves the dashboard page and a server-sent event stream of the run's metrics lines. */
export async function startDashboard(o: DashboardOptions): Promise<Dashboard> {
  const files = staticFiles();
  const metricsFile = metricsFileOf(o.run);
  const page = Buffer.from(dashboardHtml(o.runName, metricsFile));
  const tail = new MetricsTail(metricsFile, o.warn ?? (() => undefined));
  const clients = new Set<http.ServerResponse>();
  const send = (res: http.ServerResponse, event: string, data: unknown) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);

  await tail.poll();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://dashboard");
    if (!hostAllowed(req, o.host)) {
      res.writeHead(403, { "Content-Type": "text/plain" }).end("kiln dashboard answers requests addressed to localhost only\n");
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { Allow: "GET, HEAD" }).end();
      return;
    }
    if (url.pathname === "/events") {
      res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-store", ...SECURITY_HEADERS });
      send(res, "reset", {});
      if (tail.lines.length > 0) send(res, "lines", tail.lines);
      clients.add(res);
      req.on("close", () => clients.delete(res));
      return;
    }
    const file = url.pathname === "/" ? { body: page, type: "text/html; charset=utf-8" } : files.get(url.pathname);
    if (!file) {
      res.writeHead(404, { "Content-Type": "text/plain", ...SECURITY_HEADERS }).end("not found\n");
      return;
    }
    res.writeHead(200, { "Content-Type": file.type, "Content-Length": file.body.length, "Cache-Control": "no-cache", ...SECURITY_HEADERS });
    res.end(req.method === "HEAD" ? undefined : file.body);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) =>
      reject(
        new ConfigError(err.code === "EADDRINUSE" ? `port ${o.port} is in use` : `cannot listen on ${o.host}:${o.port} (${err.code ?? err.message})`, {
          where: err.code === "EADDRINUSE" ? "--port" : "--host",
          hint: err.code === "EADDRINUSE" ? "pass another --port (0 picks a free one)" : "pass a --host address of this machine, such as 127.0.0.1",
        }),
      ),
    );
    server.listen(o.port, o.host, () => resolve());
  });

  let polling = false;
  const timer = setInterval(async () => {
    if (polling) return;
    polling = true;
    try {
      const change = await tail.poll();
      for (const res of clients) {
        if (change.reset) send(res, "reset", {});
        if (change.added.length > 0 || change.reset) send(res, "lines", change.reset ? tail.lines : change.added);
      }
    } catch (err) {
      o.warn?.(`cannot read ${metricsFile} (${(err as NodeJS.ErrnoException).code ?? String(err)}); trying again`);
    } finally {
      polling = false;
    }
  }, o.pollMs ?? 500);

  const address = server.address();
  const port = typeof address === "object" && address ? address.port : o.port;
  const shownHost = o.host.includes(":") ? `[${o.host}]` : o.host;
  return {
    url: `http://${shownHost}:${port}/`,
    async close() {
      clearInterval(timer);
      for (const res of clients) res.end();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}
