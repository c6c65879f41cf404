import { createHash } from "node:crypto";
import { type IncomingMessage, type Server, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";

/** One request the Hub client made, as the server saw it. */
export interface HubRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  body: Buffer;
}

/** The routes of the Hub's upload protocol that @huggingface/hub calls to push files as one commit. */
export type HubRoute = "create" | "preupload" | "lfs-batch" | "lfs-upload" | "commit";

export interface HubServerOptions {
  /** The token the server accepts (as `Authorization: Bearer <token>`); others get 401. */
  token: string;
  /** Repositories that exist already: creating one answers 409, as the Hub does. */
  existing?: string[];
  /** Answer this route with this status (and a JSON error) instead. */
  failAt?: Partial<Record<HubRoute, number>>;
}

/**
 * A local stand-in for the Hugging Face Hub's model upload protocol: repository
 * creation, preupload (which files go to LFS storage: *.safetensors here),
 * the LFS batch API with the "basic" transfer (one PUT per object, its SHA-256
 * checked), and the NDJSON commit, whose files it keeps. Every request is recorded.
 */
export class HubServer {
  readonly requests: HubRequest[] = [];
  /** The commits made: each one's summary and files (path -> bytes). */
  readonly commits: { repo: string; summary: string; files: Map<string, Buffer> }[] = [];
  readonly created: { repo: string; visibility: string | undefined }[] = [];
  private readonly lfs = new Map<string, Buffer>();
  private server!: Server;

  private constructor(private readonly o: HubServerOptions) {}

  static async start(o: HubServerOptions): Promise<HubServer> {
    const hub = new HubServer(o);
    hub.server = createServer((req, res) => void hub.handle(req, res));
    await new Promise<void>((resolve) => hub.server.listen(0, "127.0.0.1", resolve));
    return hub;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** The routes called, in order. */
  get routes(): string[] {
    return this.requests.map((r) => `${r.method} ${r.path}`);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const url = new URL(req.url ?? "/", this.url);
    this.requests.push({ method: req.method ?? "", path: url.pathname, authorization: req.headers.authorization, body });
    const json = (status: number, value: unknown) => {
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify(value));
    };
    const route = routeOf(req.method ?? "", url.pathname);
    if (!route) return json(404, { error: `no route ${req.method} ${url.pathname}` });
    // LFS uploads go to the storage URL the batch answer gave, which carries no token.
    if (route.name !== "lfs-upload" && req.headers.authorization !== `Bearer ${this.o.token}`) return json(401, { error: "Invalid credentials in Authorization header" });
    const failure = this.o.failAt?.[route.name];
    if (failure !== undefined) return json(failure, { error: failure === 404 ? "Repository not found" : `failing ${route.name} on purpose` });
    switch (route.name) {
      case "create": {
        const r = JSON.parse(body.toString()) as { name: string; organization: string; visibility?: string };
        const repo = `${r.organization}/${r.name}`;
        if (this.o.existing?.includes(repo) || this.created.some((c) => c.repo === repo)) return json(409, { error: "You already created this model repo" });
        this.created.push({ repo, visibility: r.visibility });
        return json(200, { url: `${this.url}/${repo}`, id: repo });
      }
      case "preupload": {
        const r = JSON.parse(body.toString()) as { files: { path: string }[] };
        return json(200, { files: r.files.map((f) => ({ path: f.path, uploadMode: f.path.endsWith(".safetensors") ? "lfs" : "regular" })) });
      }
      case "lfs-batch": {
        const r = JSON.parse(body.toString()) as { objects: { oid: string; size: number }[] };
        return json(200, { transfer: "basic", objects: r.objects.map((o) => ({ ...o, actions: { upload: { href: `${this.url}/lfs-storage/${o.oid}` } } })) });
      }
      case "lfs-upload": {
        const oid = route.rest;
        if (createHash("sha256").update(body).digest("hex") !== oid) return json(400, { error: "content does not match its oid" });
        this.lfs.set(oid, body);
        res.writeHead(200).end();
        return;
      }
      case "commit": {
        const lines = body.toString().split("\n").map((l) => JSON.parse(l) as { key: string; value: Record<string, string> });
        const files = new Map<string, Buffer>();
        for (const { key, value } of lines) {
          if (key === "file") files.set(value.path, Buffer.from(value.content, "base64"));
          if (key === "lfsFile") {
            const stored = this.lfs.get(value.oid);
            if (!stored) return json(422, { error: `LFS object ${value.oid} of ${value.path} was never uploaded` });
            files.set(value.path, stored);
          }
        }
        const summary = lines.find((l) => l.key === "header")?.value.summary ?? "";
        this.commits.push({ repo: route.rest, summary, files });
        const oid = createHash("sha1").update(body).digest("hex");
        return json(200, { commitOid: oid, commitUrl: `${this.url}/${route.rest}/commit/${oid}` });
      }
    }
  }
}

function routeOf(method: string, p: string): { name: HubRoute; rest: string } | undefined {
  let m: RegExpExecArray | null;
  if (method === "POST" && p === "/api/repos/create") return { name: "create", rest: "" };
  if (method === "POST" && (m = /^\/api\/models\/([^/]+\/[^/]+)\/preupload\/[^/]+$/.exec(p))) return { name: "preupload", rest: m[1] };
  if (method === "POST" && (m = /^\/([^/]+\/[^/]+)\.git\/info\/lfs\/objects\/batch$/.exec(p))) return { name: "lfs-batch", rest: m[1] };
  if (method === "PUT" && (m = /^\/lfs-storage\/([0-9a-f]{64})$/.exec(p))) return { name: "lfs-upload", rest: m[1] };
  if (method === "POST" && (m = /^\/api\/models\/([^/]+\/[^/]+)\/commit\/[^/]+$/.exec(p))) return { name: "commit", rest: m[1] };
  return undefined;
}
