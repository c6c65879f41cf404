import { mkdir, readFile, readdir, rm } from "node:fs/promises";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { expectRefused } from "./support/expectations.js";
import { HubServer } from "./support/hub-server.js";
import { expectSuccess } from "./support/runs.js";
import { Workspace, textTokens } from "./support/workspace.js";

// kiln push uploads an exported folder through @huggingface/hub to HF_ENDPOINT, here a
// local server speaking the Hub's upload protocol (create, preupload, LFS batch + PUT,
// NDJSON commit) and recording what it was sent.
const TOKEN = "hf_kilnTestToken";

let ws: Workspace;
let hub: HubServer | undefined;
beforeAll(async () => {
  ws = await Workspace.create("push");
  await ws.writeConfig("tiny.yaml", { trainer: { max_steps: 2 } });
  await ws.writeTokens("data.bin", textTokens(2000));
  expectSuccess(await ws.run(["train", "-f", "tiny.yaml", "-d", "data.bin", "--output-dir", "run", "--headless"]), "kiln train");
  expectSuccess(await ws.run(["export", "--checkpoint", "run/final.safetensors", "--out", "hf"]), "kiln export");
});
afterAll(() => ws.remove());
afterEach(async () => {
  await hub?.close();
  hub = undefined;
});

const push = (args: string[], env: Record<string, string>) => ws.run(["push", "--repo", "me/tiny", ...args], { env });

async function exported(): Promise<Map<string, Buffer>> {
  const names = (await readdir(ws.path("hf"))).sort();
  return new Map(await Promise.all(names.map(async (n) => [n, await readFile(ws.path("hf", n))] as [string, Buffer])));
}

describe("kiln push", () => {
  it("creates the repository and commits every file of the folder, the weights through LFS storage", async () => {
    hub = await HubServer.start({ token: TOKEN });
    const r = expectSuccess(await push(["--folder", "hf", "--private"], { HF_ENDPOINT: hub.url, HF_TOKEN: TOKEN }), "kiln push");
    expect(hub.created).toEqual([{ repo: "me/tiny", visibility: "private" }]);
    expect(hub.commits).toHaveLength(1);
    expect(hub.commits[0]!.repo).toBe("me/tiny");
    expect(hub.commits[0]!.files).toEqual(await exported());
    expect(hub.routes.map((x) => x.replace(/[0-9a-f]{64}$/, "<sha256>"))).toEqual([
      "POST /api/repos/create",
      "POST /api/models/me/tiny/preupload/main",
      "POST /me/tiny.git/info/lfs/objects/batch",
      "PUT /lfs-storage/<sha256>",
      "POST /api/models/me/tiny/commit/main",
    ]);
    const [said, commit] = r.stdout.split("\n");
    expect(said).toMatch(/^pushed 4 files \(\d+\.\d KiB\) to http:\/\/127\.0\.0\.1:\d+\/me\/tiny \(new repository\): README\.md, config\.json, generation_config\.json, model\.safetensors$/);
    expect(commit).toMatch(/^commit [0-9a-f]{40} http:\/\/127\.0\.0\.1:\d+\/me\/tiny\/commit\/[0-9a-f]{40}$/);
  });

  it("pushes onto an existing repository with the token file, and --checkpoint exports on the way", async () => {
    hub = await HubServer.start({ token: TOKEN, existing: ["me/tiny"] });
    await mkdir(ws.path(".cache", "huggingface"), { recursive: true });
    await ws.write(".cache/huggingface/token", `${TOKEN}\n`);
    try {
      expectSuccess(await push(["--checkpoint", "run/final.safetensors"], { HF_ENDPOINT: hub.url }), "kiln push --checkpoint");
    } finally {
      await rm(ws.path(".cache"), { recursive: true });
    }
    expect(hub.created).toEqual([]);
    expect(hub.commits[0]!.files).toEqual(await exported());
  });

  it("refuses without a token, before any request", async () => {
    hub = await HubServer.start({ token: TOKEN });
    expectRefused(await push(["--folder", "hf"], { HF_ENDPOINT: hub.url }), {
      kind: "HubError",
      where: ws.path(".cache", "huggingface", "token"),
      message: /^no Hugging Face access token: HF_TOKEN is not set and there is no token file/,
      hint: /set HF_TOKEN=hf_\.\.\. or run `huggingface-cli login`/,
    });
    expect(hub.requests).toEqual([]);
  });

  it("names a refused token (401), a missing repository (404), no write access (403), a network failure and a failed upload, committing nothing", async () => {
    hub = await HubServer.start({ token: TOKEN, failAt: { preupload: 404 } });
    expectRefused(await push(["--folder", "hf"], { HF_ENDPOINT: hub.url, HF_TOKEN: "hf_wrong" }), {
      kind: "HubError",
      where: `${hub.url}/me/tiny`,
      message: /^the Hub refused the access token \(401 Unauthorized\) while creating the repository; nothing was committed to me\/tiny$/,
      hint: /the token from HF_TOKEN is wrong or expired/,
    });
    expectRefused(await push(["--folder", "hf"], { HF_ENDPOINT: hub.url, HF_TOKEN: TOKEN }), {
      kind: "HubError",
      where: `${hub.url}/me/tiny`,
      message: /^repository me\/tiny was not found \(404 Not Found\) while uploading the files; nothing was committed to me\/tiny$/,
      hint: /check OWNER\/NAME/,
    });
    await hub.close();
    hub = await HubServer.start({ token: TOKEN, failAt: { create: 403 } });
    expectRefused(await push(["--folder", "hf"], { HF_ENDPOINT: hub.url, HF_TOKEN: TOKEN }), {
      kind: "HubError",
      where: `${hub.url}/me/tiny`,
      message: /^the access token may not write to me\/tiny \(403 Forbidden\) while creating the repository; nothing was committed to me\/tiny$/,
      hint: /use a token with write access to me's repositories/,
    });
    const gone = hub.url;
    await hub.close();
    expectRefused(await push(["--folder", "hf"], { HF_ENDPOINT: gone, HF_TOKEN: TOKEN }), {
      kind: "HubError",
      where: `${gone}/me/tiny`,
      message: /^cannot reach http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\) while creating the repository; nothing was committed to me\/tiny$/,
      hint: /check the network connection, and HF_ENDPOINT/,
    });
    hub = await HubServer.start({ token: TOKEN, failAt: { "lfs-upload": 500 } });
    expectRefused(await push(["--folder", "hf"], { HF_ENDPOINT: hub.url, HF_TOKEN: TOKEN }), {
      kind: "HubError",
      where: `${hub.url}/me/tiny`,
      message: /^the Hub answered 500 .* while uploading the files; nothing was committed to me\/tiny$/,
      hint: /push again/,
    });
    expect(hub.commits).toEqual([]);
    expect(hub.routes).not.toContain("POST /api/models/me/tiny/commit/main");
  });
});
