import ts from "typescript";

/** One comment of a source file and the line (1-based) it starts on. */
export interface SourceComment {
  line: number;
  text: string;
}

/** Languages whose comments are `//` and `/* *\/` (TypeScript's scanner reads C, C++ and CUDA well enough for that). */
const C_FAMILY = /\.(ts|tsx|js|mjs|cjs|c|h|cu|cuh|cc|cpp|hpp)$/;
/** Languages whose comments run from `#` to the end of the line. */
const HASH_COMMENTS = /(\.(sh|py|ya?ml|cmake)|(^|\/)CMakeLists\.txt)$/;

/** Whether `commentsOf` knows the comment syntax of this file. */
export function hasKnownComments(file: string): boolean {
  return C_FAMILY.test(file) || HASH_COMMENTS.test(file);
}

/** The comments of a source file (empty for a file whose comment syntax is not known). */
export function commentsOf(file: string, text: string): SourceComment[] {
  if (C_FAMILY.test(file)) return cFamilyComments(text);
  if (HASH_COMMENTS.test(file)) return hashComments(text);
  return [];
}

function lineAt(text: string, offset: number): number {
  let line = 1;
  for (let i = text.indexOf("\n"); i !== -1 && i < offset; i = text.indexOf("\n", i + 1)) line++;
  return line;
}

/** Tokens that end an expression: a `/` after one of them divides, after anything else it starts a regular expression. */
const ENDS_EXPRESSION = new Set<ts.SyntaxKind>([
  ts.SyntaxKind.Identifier,
  ts.SyntaxKind.NumericLiteral,
  ts.SyntaxKind.BigIntLiteral,
  ts.SyntaxKind.StringLiteral,
  ts.SyntaxKind.NoSubstitutionTemplateLiteral,
  ts.SyntaxKind.TemplateTail,
  ts.SyntaxKind.CloseParenToken,
  ts.SyntaxKind.CloseBracketToken,
  ts.SyntaxKind.CloseBraceToken,
  ts.SyntaxKind.PlusPlusToken,
  ts.SyntaxKind.MinusMinusToken,
  ts.SyntaxKind.ThisKeyword,
  ts.SyntaxKind.SuperKeyword,
  ts.SyntaxKind.TrueKeyword,
  ts.SyntaxKind.FalseKeyword,
  ts.SyntaxKind.NullKeyword,
]);

function cFamilyComments(text: string): SourceComment[] {
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.Standard, text);
  const out: SourceComment[] = [];
  // Brace depths at which a template literal's `${ ... }` closes, so its text is scanned as template text again.
  const templateDepths: number[] = [];
  let depth = 0;
  let previous: ts.SyntaxKind | undefined;
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    if (kind === ts.SyntaxKind.SingleLineCommentTrivia || kind === ts.SyntaxKind.MultiLineCommentTrivia) {
      out.push({ line: lineAt(text, scanner.getTokenStart()), text: scanner.getTokenText() });
      continue;
    }
    if (kind === ts.SyntaxKind.WhitespaceTrivia || kind === ts.SyntaxKind.NewLineTrivia) continue;
    if ((kind === ts.SyntaxKind.SlashToken || kind === ts.SyntaxKind.SlashEqualsToken) && (previous === undefined || !ENDS_EXPRESSION.has(previous))) kind = scanner.reScanSlashToken();
    if (kind === ts.SyntaxKind.TemplateHead) templateDepths.push(depth);
    else if (kind === ts.SyntaxKind.OpenBraceToken) depth++;
    else if (kind === ts.SyntaxKind.CloseBraceToken) {
      if (templateDepths.at(-1) === depth) {
        kind = scanner.reScanTemplateToken(false);
        if (kind === ts.SyntaxKind.TemplateTail) templateDepths.pop();
      } else depth--;
    }
    previous = kind;
  }
  return out;
}

function hashComments(text: string): SourceComment[] {
  const out: SourceComment[] = [];
  text.split("\n").forEach((line, i) => {
    if (line.startsWith("#!")) return;
    // A `#` at the start of a line or after a space, outside quotes, starts a comment.
    let quote: string | undefined;
    for (let j = 0; j < line.length; j++) {
      const c = line[j];
      if (quote) {
        if (c === quote) quote = undefined;
      } else if (c === '"' || c === "'") quote = c;
      else if (c === "#" && (j === 0 || /\s/.test(line[j - 1]))) {
        out.push({ line: i + 1, text: line.slice(j) });
        return;
      }
    }
  });
  return out;
}
