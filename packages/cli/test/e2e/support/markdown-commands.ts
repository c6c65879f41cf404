import { type Token, type Tokens, marked } from "marked";
import { type ParseEntry, parse as parseShell } from "shell-quote";

/** Fence languages whose blocks hold commands; every other block (untagged, `text`, `ts`, ...) is output or source. */
export const SHELL_LANGUAGES = new Set(["sh", "bash", "shell"]);

/** A word of a command: a plain string, or a glob the shell would expand. */
export type ShellWord = string | { glob: string };

/** One simple command of a guide or README, parsed as a POSIX shell would split it. */
export interface DocCommand {
  /** The document, relative to the repository root. */
  file: string;
  /** 1-based line of the command in the document. */
  line: number;
  /** The line as written (continuation lines joined, the comment kept). */
  written: string;
  /** Leading `NAME=value` assignments. */
  env: Record<string, string>;
  words: ShellWord[];
  /** The line's trailing comment, without `#` (the last command of a line carries it). */
  comment?: string;
}

/** Shell syntax the documentation may use between commands; anything else (pipes, redirections, subshells) is refused. */
const SEPARATORS = new Set(["&&", ";"]);

function isAssignment(entry: ParseEntry): entry is string {
  return typeof entry === "string" && /^[A-Za-z_][A-Za-z0-9_]*=/.test(entry);
}

/** Splits one shell line into its simple commands. Throws, naming the line, on syntax the tests do not model. */
export function parseShellLine(file: string, line: number, written: string): DocCommand[] {
  const entries = parseShell(written, (name) => {
    throw new Error(`${file}:${line}: $${name} in a documented command: write the value out so the command runs as written`);
  });
  const commands: DocCommand[] = [];
  let current: DocCommand = { file, line, written, env: {}, words: [] };
  const finish = () => {
    if (current.words.length > 0) commands.push(current);
    current = { file, line, written, env: {}, words: [] };
  };
  for (const entry of entries) {
    if (typeof entry === "object" && "comment" in entry) {
      current.comment = entry.comment.trim();
      if (current.words.length === 0) commands.at(-1)!.comment = current.comment;
    } else if (typeof entry === "object" && "op" in entry && entry.op === "glob") {
      current.words.push({ glob: (entry as { pattern: string }).pattern });
    } else if (typeof entry === "object" && "op" in entry && SEPARATORS.has(entry.op)) {
      finish();
    } else if (typeof entry === "object") {
      throw new Error(`${file}:${line}: shell syntax ${JSON.stringify(entry)} in a documented command; keep commands to words, && and ;`);
    } else if (current.words.length === 0 && isAssignment(entry)) {
      const eq = entry.indexOf("=");
      current.env[entry.slice(0, eq)] = entry.slice(eq + 1);
    } else {
      current.words.push(entry);
    }
  }
  finish();
  return commands;
}

/** The fenced shell blocks of a markdown text with the line each starts on (the line after the fence). */
function shellBlocks(markdown: string): { line: number; text: string }[] {
  const blocks: { line: number; text: string }[] = [];
  let searchFrom = 0;
  marked.walkTokens(marked.lexer(markdown), (token: Token) => {
    if (token.type !== "code") return;
    const code = token as Tokens.Code;
    const at = markdown.indexOf(code.raw, searchFrom);
    if (at !== -1) searchFrom = at + code.raw.length;
    const lang = (code.lang ?? "").trim().split(/\s+/)[0];
    if (!SHELL_LANGUAGES.has(lang)) return;
    blocks.push({ line: markdown.slice(0, at).split("\n").length + 1, text: code.text });
  });
  return blocks;
}

/** Every command of every fenced sh/bash/shell block of a markdown document, in order. */
export function documentCommands(file: string, markdown: string): DocCommand[] {
  const out: DocCommand[] = [];
  for (const block of shellBlocks(markdown)) {
    const lines = block.text.split("\n");
    for (let i = 0; i < lines.length; i++) {
      const first = i;
      let text = lines[i];
      // A line ending in a backslash goes on on the next one.
      while (text.endsWith("\\") && i + 1 < lines.length) text = `${text.slice(0, -1)} ${lines[++i].trimStart()}`;
      if (text.trim() === "" || text.trim().startsWith("#")) continue;
      out.push(...parseShellLine(file, block.line + first, text.trim()));
    }
  }
  return out;
}

/** The text of every fenced block tagged `lang` (e.g. Modelfile), in order. */
export function fencedBlocks(markdown: string, lang: string): string[] {
  const out: string[] = [];
  marked.walkTokens(marked.lexer(markdown), (token: Token) => {
    if (token.type === "code" && ((token as Tokens.Code).lang ?? "").trim().split(/\s+/)[0] === lang) out.push((token as Tokens.Code).text);
  });
  return out;
}

/** Words that start a command: a block without a shell language whose first line starts with one is a command block left untagged. */
const COMMAND_START = /^(\$ |kiln |pnpm |node |bash |npx |npm )/;

/** First lines of code blocks that hold commands but are not tagged sh, bash or shell (so no test would run them). */
export function untaggedCommandBlocks(markdown: string): string[] {
  const out: string[] = [];
  marked.walkTokens(marked.lexer(markdown), (token: Token) => {
    if (token.type !== "code") return;
    const code = token as Tokens.Code;
    const first = code.text.split("\n").find((l) => l.trim() !== "") ?? "";
    if (!(code.lang ?? "").trim() && COMMAND_START.test(first.trim())) out.push(first.trim());
  });
  return out;
}

/** The `code` spans of a markdown text's prose (not of its code blocks). */
export function inlineCodeSpans(markdown: string): string[] {
  const spans: string[] = [];
  marked.walkTokens(marked.lexer(markdown), (token: Token) => {
    if (token.type === "codespan") spans.push((token as Tokens.Codespan).text);
  });
  return spans;
}
