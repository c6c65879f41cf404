import { openAsBlob } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import { ConfigError } from "@kiln/contract";
import { fileReadError } from "@kiln/core";
import { HubApiError, createRepo, uploadFiles } from "@huggingface/hub";
import { HubError } from "./hub-error.js";

export interface PushRequest {
  /** OWNER/NAME of a model repository. */
  repo: string;
  /** A folder kiln export wrote (config.json beside the weights). */
  folder: string;
  /** Create the repository private when it does not exist yet. */
  private: boolean;
  /** The Hub's address (hubEndpoint()). */
  endpoint: string;
  token: string;
  /** Where the token came from, for messages. */
  tokenFrom: string;
}

export interface PushResult {
  files: string[];
  bytes: number;
  /** The commit the files are in, as the Hub answered it. */
  commit: { oid: string; url: string };
  /** False when the repository existed already. */
  created: boolean;
}

/**
 * Uploads every file of `folder` to a model repository as one commit, creating
 * the repository when it does not exist. A Hub commit is all or nothing: any
 * failure is a HubError that says nothing was committed.
 */
export async function pushFolder(r: PushRequest): Promise<PushResult> {
  if (!/^[\w.-]+\/[\w.-]+$/.test(r.repo)) {
    throw new ConfigError(`"${r.repo}" is not a repository name of the form OWNER/NAME`, { where: "--repo", hint: "name it as on the Hub, e.g. --repo my-user/my-model" });
  }
  const files = await folderFiles(r.folder);
  const repo = { type: "model" as const, name: r.repo };
  const common = { repo, accessToken: r.token, hubUrl: r.endpoint };
  let created = true;
  try {
    await createRepo({ ...common, ...(r.private ? { visibility: "private" as const } : {}) });
  } catch (err) {
    if (!(err instanceof HubApiError && err.statusCode === 409)) throw hubError(err, r, "creating the repository");
    created = false; // It exists: the commit goes on top of it.
  }
  const blobs = await Promise.all(files.map(async (f) => ({ path: f.name, content: await openAsBlob(f.file) })));
  let output: Awaited<ReturnType<typeof uploadFiles>>;
  try {
    output = await uploadFiles({ ...common, files: blobs, commitTitle: `Upload ${files.length} files with kiln push` });
  } catch (err) {
    throw hubError(err, r, "uploading the files");
  }
  if (!output?.commit.oid) {
    throw new HubError("the Hub answered the commit without a commit id, so the push cannot be confirmed", { where: repoUrl(r), hint: "look at the repository's history on the Hub, and push again if the commit is not there" });
  }
  return { files: files.map((f) => f.name), bytes: files.reduce((n, f) => n + f.size, 0), commit: output.commit, created };
}

function repoUrl(r: PushRequest): string {
  return `${r.endpoint}/${r.repo}`;
}

/** The folder's files (not its dotfiles or subfolders), checked to be a model folder. */
async function folderFiles(folder: string): Promise<{ name: string; file: string; size: number }[]> {
  const entries = await readdir(folder, { withFileTypes: true }).catch((err: unknown) => {
    throw fileReadError(err, folder, {
      what: "model folder",
      error: ConfigError,
      after: "Pass a folder written by kiln export (--folder), or a checkpoint to export and push (--checkpoint).",
    });
  });
  const names = entries.filter((e) => e.isFile() && !e.name.startsWith(".")).map((e) => e.name).sort();
  if (!names.includes("config.json")) {
    throw new ConfigError("the folder has no config.json: it is not a model folder", { where: folder, hint: "push a folder written by kiln export, or pass --checkpoint FILE to export one on the way" });
  }
  return Promise.all(names.map(async (name) => ({ name, file: path.join(folder, name), size: (await stat(path.join(folder, name))).size })));
}

/** A HubError for a failed request: what the Hub (or the network) said, in words, and that nothing was committed. */
function hubError(err: unknown, r: PushRequest, doing: string): HubError {
  const where = repoUrl(r);
  const nothing = `while ${doing}; nothing was committed to ${r.repo}`;
  if (err instanceof HubApiError) {
    const [message, hint] =
      err.statusCode === 401
        ? [`the Hub refused the access token (401 Unauthorized) ${nothing}`, `the token from ${r.tokenFrom} is wrong or expired: create one with write access at https://huggingface.co/settings/tokens`]
        : err.statusCode === 403
          ? [`the access token may not write to ${r.repo} (403 Forbidden) ${nothing}`, `use a token with write access to ${r.repo.split("/")[0]}'s repositories`]
          : err.statusCode === 404
            ? [`repository ${r.repo} was not found (404 Not Found) ${nothing}`, "check OWNER/NAME; kiln push creates repositories under your user or an organization you belong to"]
            : [`the Hub answered ${err.statusCode} (${err.message.split(". URL:")[0]}) ${nothing}`, "push again; if it keeps failing, see the Hub's status page"];
    return new HubError(message, { where, hint, cause: err });
  }
  const cause = (err as { cause?: { code?: string } } | undefined)?.cause;
  if (err instanceof TypeError && /fetch failed/.test(err.message)) {
    return new HubError(`cannot reach ${r.endpoint} (${cause?.code ?? "network error"}) ${nothing}`, {
      where,
      hint: `check the network connection${process.env.HF_ENDPOINT ? `, and HF_ENDPOINT (${process.env.HF_ENDPOINT})` : ""}, then push again`,
      cause: err,
    });
  }
  return new HubError(`${err instanceof Error ? err.message : String(err)} ${nothing}`, { where, hint: "push again", cause: err });
}
