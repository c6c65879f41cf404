import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Command } from "commander";
import { ConfigError } from "@kiln/contract";
import { exportHfFolder } from "@kiln/core";
import { hubEndpoint, hubToken } from "../push/hub-token.js";
import { formatBytes } from "../estimate/format-bytes.js";

interface PushFlags {
  repo: string;
  folder?: string;
  checkpoint?: string;
  private?: boolean;
}

export function registerPush(program: Command): void {
  program
    .command("push")
    .description("upload a model folder to the Hugging Face Hub as one commit (token from HF_TOKEN or huggingface-cli login; HF_ENDPOINT for another hub)")
    .requiredOption("--repo <owner/name>", "the model repository (created when it does not exist)")
    .option("--folder <dir>", "a folder written by kiln export")
    .option("--checkpoint <file>", "a kiln checkpoint: exported (f32) to a temporary folder and pushed")
    .option("--private", "create the repository private")
    .action(async (f: PushFlags) => {
      if ((f.folder === undefined) === (f.checkpoint === undefined)) {
        throw new ConfigError("name what to push: either --folder DIR or --checkpoint FILE", { where: "kiln push", hint: "e.g. kiln push --repo my-user/my-model --folder exports/my-model" });
      }
      const { token, from } = hubToken();
      const endpoint = hubEndpoint();
      const staging = f.checkpoint === undefined ? undefined : await mkdtemp(path.join(tmpdir(), "kiln-push-"));
      try {
        const folder = f.folder ?? path.join(staging!, "model");
        if (f.checkpoint !== undefined) await exportHfFolder(f.checkpoint, folder);
        // The Hub client loads only for this command.
        const { pushFolder } = await import("../push/push-folder.js");
        const r = await pushFolder({ repo: f.repo, folder, private: f.private === true, endpoint, token, tokenFrom: from });
        if (!r.created && f.private) process.stderr.write(`warning: ${f.repo} existed already; --private does not change its visibility\n`);
        process.stdout.write(`pushed ${r.files.length} files (${formatBytes(r.bytes)}) to ${endpoint}/${f.repo}${r.created ? " (new repository)" : ""}: ${r.files.join(", ")}\ncommit ${r.commit.oid} ${r.commit.url}\n`);
      } finally {
        if (staging) await rm(staging, { recursive: true, force: true });
      }
    });
}
