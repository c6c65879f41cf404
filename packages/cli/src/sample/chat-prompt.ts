import { readFile } from "node:fs/promises";
import { DataError } from "@kiln/contract";
import { CHAT_ROLES, type ChatMessage, ChatTemplate, type Tokenizer, fileReadError } from "@kiln/core";

/** What `kiln sample --chat` feeds the model, and where the reply ends. */
export interface ChatPrompt {
  /** The conversation rendered with the generation prompt: the assistant's turn is next. */
  text: string;
  /** Ids that end the turn (the tokenizer's eos): generation stops before printing them. */
  endIds: number[];
  /** The text the template writes after a reply (`<|im_end|>`), trimmed; the reply stops where it appears. */
  endText: string;
}

/**
 * The conversation (--messages, or --prompt as one user message) rendered with the
 * chat template (--chat-template, else the one the checkpoint was trained with, else
 * the tokenizer's), and how the assistant's
 * turn ends: the tokenizer's end token and the text the template closes a reply with.
 */
export async function chatPrompt(tokenizer: Tokenizer, o: { prompt?: string; messages?: string; chatTemplate?: string; checkpoint: string; recorded?: string }): Promise<ChatPrompt> {
  const template =
    o.chatTemplate !== undefined
      ? await ChatTemplate.fromFile(o.chatTemplate, tokenizer.files)
      : o.recorded !== undefined
        ? ChatTemplate.fromText(o.recorded, `${o.checkpoint} (the chat template it was trained with)`, tokenizer.files)
        : ChatTemplate.fromTokenizer(tokenizer.files, tokenizer.location ?? tokenizer.name);
  if (template === undefined) {
    throw new DataError(`--chat needs a chat template, and the tokenizer ${tokenizer.name} has none`, {
      where: o.checkpoint,
      hint: "Give the template the model was trained with: --chat-template FILE (for example models/chatml.jinja).",
    });
  }
  if (o.messages !== undefined && o.prompt !== undefined) {
    throw new DataError("--chat takes the conversation from --messages or --prompt, not both", { where: "--messages", hint: "Put the user's message last in the --messages file." });
  }
  const messages = o.messages !== undefined ? await readMessages(o.messages) : o.prompt !== undefined ? [{ role: "user" as const, content: o.prompt }] : undefined;
  if (messages === undefined) throw new DataError("--chat needs the user's message", { where: "--prompt", hint: 'Pass --prompt "..." or --messages FILE.' });
  const where = o.messages ?? "--prompt";
  const text = template.render(messages, true, where);
  // The template's text after an empty reply is how it closes the assistant's turn.
  const closed = template.render([...messages, { role: "assistant", content: "" }], false, where);
  const endText = closed.startsWith(text) ? closed.slice(text.length).trim() : "";
  const end = tokenizer.eos ?? tokenizer.endOfText;
  return { text, endIds: end === undefined ? [] : [end], endText };
}

async function readMessages(file: string): Promise<ChatMessage[]> {
  let value: unknown;
  try {
    value = JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    if (err instanceof SyntaxError) throw new DataError(`not valid JSON (${err.message})`, { where: file, hint: 'Write the conversation as [{"role": "user", "content": "..."}].' });
    throw fileReadError(err, file, { what: "messages file", error: DataError });
  }
  const list = Array.isArray(value) ? value : (value as { messages?: unknown } | null)?.messages;
  if (!Array.isArray(list) || list.length === 0) throw new DataError("the file holds no messages", { where: file, hint: 'Write the conversation as [{"role": "user", "content": "..."}] or {"messages": [...]}.' });
  return list.map((m, i) => {
    const { role, content } = (m ?? {}) as Record<string, unknown>;
    if (!(CHAT_ROLES as readonly unknown[]).includes(role)) throw new DataError(`messages[${i}].role is ${JSON.stringify(role) ?? "missing"}; a role is one of ${CHAT_ROLES.join(", ")}`, { where: file, hint: "Rename the role." });
    if (typeof content !== "string") throw new DataError(`messages[${i}] has no "content" string`, { where: file, hint: "Give each message its text as \"content\"." });
    return { role: role as ChatMessage["role"], content };
  });
}
