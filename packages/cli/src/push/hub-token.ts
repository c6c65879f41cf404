import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { HubError } from "./hub-error.js";

/** The Hugging Face Hub's address: HF_ENDPOINT, as huggingface_hub reads it, else huggingface.co. */
export function hubEndpoint(env: NodeJS.ProcessEnv = process.env): string {
  return (env.HF_ENDPOINT || "https://huggingface.co").replace(/\/+$/, "");
}

/** Where `huggingface-cli login` keeps the token: HF_TOKEN_PATH, else $HF_HOME/token, else ~/.cache/huggingface/token. */
export function hubTokenFile(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HF_TOKEN_PATH) return env.HF_TOKEN_PATH;
  return path.join(env.HF_HOME || path.join(os.homedir(), ".cache", "huggingface"), "token");
}

/** The access token to push with: HF_TOKEN, else the token file; a HubError saying how to get one when there is none. */
export function hubToken(env: NodeJS.ProcessEnv = process.env): { token: string; from: string } {
  const file = hubTokenFile(env);
  let token = env.HF_TOKEN?.trim();
  let from = "HF_TOKEN";
  if (!token) {
    try {
      token = readFileSync(file, "utf8").trim();
      from = file;
    } catch {
      token = undefined;
    }
  }
  if (!token) {
    throw new HubError("no Hugging Face access token: HF_TOKEN is not set and there is no token file", {
      where: file,
      hint: "create a token with write access at https://huggingface.co/settings/tokens, then set HF_TOKEN=hf_... or run `huggingface-cli login`",
    });
  }
  if (!token.startsWith("hf_")) {
    throw new HubError("the access token does not start with hf_, as Hugging Face tokens do", { where: from, hint: "copy the whole token from https://huggingface.co/settings/tokens" });
  }
  return { token, from };
}
