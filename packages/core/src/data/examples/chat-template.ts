import { readFile } from "node:fs/promises";
import { DataError } from "@kiln/contract";
import { Template } from "@huggingface/jinja";
import { fileReadError } from "../../fs/file-errors.js";
import type { TokenizerFiles } from "../tokenizer-files.js";

export const CHAT_ROLES = ["system", "user", "assistant"] as const;
export type ChatRole = (typeof CHAT_ROLES)[number];

export interface ChatMessage {
  role: ChatRole;
  content: string;
}

/** A piece of rendered text and whether it is the assistant's (trained on). */
export interface TextSegment {
  text: string;
  trained: boolean;
}

/**
 * A tokenizer's chat template (Jinja, as transformers' apply_chat_template
 * renders it): messages, add_generation_prompt and the tokenizer's special
 * tokens as variables.
 */
export class ChatTemplate {
  private constructor(
    /** The template's Jinja source. */
    readonly text: string,
    private readonly template: Template,
    /** Where the template came from, for messages. */
    readonly source: string,
    private readonly specials: Record<string, string>,
  ) {}

  /** The template of a tokenizer folder (chat_template.jinja, else tokenizer_config.json's chat_template); undefined when it has none. */
  static fromTokenizer(files: TokenizerFiles | undefined, folder: string): ChatTemplate | undefined {
    const config = parseConfig(files?.["tokenizer_config.json"]);
    const jinja = files?.["chat_template.jinja"];
    if (jinja !== undefined) return ChatTemplate.compile(jinja, `${folder}/chat_template.jinja`, config);
    const t = config.chat_template;
    if (typeof t === "string") return ChatTemplate.compile(t, `${folder}/tokenizer_config.json (chat_template)`, config);
    if (Array.isArray(t)) {
      // A list of named templates: the "default" one, as transformers picks.
      const named = t.find((x) => typeof x === "object" && x !== null && (x as { name?: unknown }).name === "default") as { template?: unknown } | undefined;
      if (typeof named?.template === "string") return ChatTemplate.compile(named.template, `${folder}/tokenizer_config.json (chat_template "default")`, config);
    }
    return undefined;
  }

  /** A template's text (a checkpoint's META_CHAT_TEMPLATE), with the tokenizer's special tokens; `source` names it in messages. */
  static fromText(text: string, source: string, files: TokenizerFiles | undefined): ChatTemplate {
    return ChatTemplate.compile(text, source, parseConfig(files?.["tokenizer_config.json"]));
  }

  /** A template file given on the command line (--chat-template), with the tokenizer's special tokens. */
  static async fromFile(file: string, files: TokenizerFiles | undefined): Promise<ChatTemplate> {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      throw fileReadError(err, file, { what: "chat template", error: DataError });
    }
    return ChatTemplate.compile(text, file, parseConfig(files?.["tokenizer_config.json"]));
  }

  private static compile(text: string, source: string, config: Record<string, unknown>): ChatTemplate {
    let template: Template;
    try {
      template = new Template(text);
    } catch (err) {
      throw new DataError(`the chat template does not parse as Jinja (${err instanceof Error ? err.message : String(err)})`, { where: source, hint: "Fix the template, or give another with --chat-template FILE." });
    }
    const specials: Record<string, string> = {};
    for (const key of ["bos_token", "eos_token", "unk_token", "pad_token"]) {
      const v = config[key];
      const content = typeof v === "string" ? v : typeof (v as { content?: unknown } | null)?.content === "string" ? ((v as { content: string }).content) : undefined;
      if (content !== undefined) specials[key] = content;
    }
    return new ChatTemplate(text, template, source, specials);
  }

  /** The conversation as text; `where` names the row for a template that fails. */
  render(messages: readonly ChatMessage[], addGenerationPrompt: boolean, where: string): string {
    try {
      return this.template.render({ ...this.specials, messages, add_generation_prompt: addGenerationPrompt });
    } catch (err) {
      throw new DataError(`the chat template ${this.source} fails to render this conversation (${err instanceof Error ? err.message : String(err)})`, {
        where,
        hint: "Check the row's messages against what the template expects (roles, their order), or give another template with --chat-template FILE.",
      });
    }
  }

  /**
   * The conversation cut into the template's text (not trained) and each
   * assistant turn as the template writes it, end-of-turn text included
   * (trained). A turn is the text between the conversation rendered up to it
   * with the generation prompt and rendered with it; the template must render
   * each prefix of the conversation as a prefix of the whole.
   */
  segments(messages: readonly ChatMessage[], where: string): TextSegment[] {
    const whole = this.render(messages, false, where);
    const segments: TextSegment[] = [];
    let done = 0;
    messages.forEach((m, i) => {
      if (m.role !== "assistant") return;
      const before = this.render(messages.slice(0, i), true, where);
      const upTo = this.render(messages.slice(0, i + 1), false, where);
      if (!upTo.startsWith(before) || !whole.startsWith(upTo) || before.length < done) {
        throw new DataError(`the chat template ${this.source} does not render the conversation up to message ${i} as the start of the whole, so the assistant's text cannot be told apart`, {
          where,
          hint: "Templates that rewrite earlier turns (for example, dropping past reasoning) need a template that does not: give one with --chat-template FILE.",
        });
      }
      if (before.length > done) segments.push({ text: whole.slice(done, before.length), trained: false });
      if (upTo.length > before.length) segments.push({ text: whole.slice(before.length, upTo.length), trained: true });
      done = upTo.length;
    });
    if (whole.length > done) segments.push({ text: whole.slice(done), trained: false });
    return segments;
  }
}

function parseConfig(text: string | undefined): Record<string, unknown> {
  if (text === undefined) return {};
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
