import { DataError } from "@kiln/contract";
import { type DataSidecar, u32Sidecar, writeDataSidecar } from "./data-sidecar.js";
import { findSafeCut } from "./text-cut.js";
import { TokenFileWriter } from "./token-file-writer.js";
import type { Tokenizer } from "./tokenizer.js";

const ENCODE_AT_CHARS = 1 << 20;
const FORCE_CUT_AT_CHARS = 16 << 20;

/**
 * Turns streamed text into a u32 token file and its sidecar. Text is buffered
 * and tokenized in pieces cut at safe points (same ids as tokenizing it whole),
 * so inputs of any size go through bounded memory; a tokenizer that prefixes
 * the text it encodes (Tokenizer.prefixesText) is cut only within documents
 * over 16M characters. Each document that has
 * text starts with the tokenizer's <|endoftext|> id, when it has one (llm.c's
 * convention), so documents stay apart and generation can start from it.
 * Nothing appears at the output path until commit().
 */
export class TextTokenWriter {
  private pending = "";
  private documentHasText = false;
  private textTokens = 0;
  /** Where the current document began: tokens in the file, and text tokens, before it. */
  private documentStart = { tokens: 0, textTokens: 0 };

  private constructor(
    private readonly file: TokenFileWriter,
    readonly tokenizer: Tokenizer,
  ) {}

  static async create(output: string, tokenizer: Tokenizer): Promise<TextTokenWriter> {
    return new TextTokenWriter(await TokenFileWriter.create(output), tokenizer);
  }

  get target(): string {
    return this.file.target;
  }

  /** Tokens written so far, separators included (text still buffered is not counted). */
  get tokenCount(): number {
    return this.file.tokenCount;
  }

  async write(text: string): Promise<void> {
    if (text.length === 0) return;
    this.pending += text;
    if (this.pending.length < ENCODE_AT_CHARS) return;
    // A tokenizer that prefixes the text it encodes has no safe cut: documents go whole up to 16M characters.
    let cut = this.tokenizer.prefixesText ? 0 : findSafeCut(this.pending);
    if (cut === 0) {
      if (this.pending.length < FORCE_CUT_AT_CHARS) return;
      cut = ENCODE_AT_CHARS; // no safe point in 16M characters: not ordinary text; cut anyway
      if (isHighSurrogate(this.pending.charCodeAt(cut - 1))) cut -= 1;
    }
    const head = this.pending.slice(0, cut);
    this.pending = this.pending.slice(cut);
    await this.encode(head);
  }

  /** Ends the current document: its remaining text is tokenized now. */
  async endDocument(): Promise<void> {
    const rest = this.pending;
    this.pending = "";
    await this.encode(rest);
    this.documentHasText = false;
    this.documentStart = { tokens: this.file.tokenCount, textTokens: this.textTokens };
  }

  /** Takes back the current document: its text and every token written for it since the last endDocument(). */
  async discardDocument(): Promise<void> {
    this.pending = "";
    await this.file.truncate(this.documentStart.tokens);
    this.textTokens = this.documentStart.textTokens;
    this.documentHasText = false;
  }

  /**
   * Finishes the file: refuses empty output, writes the sidecar and moves both
   * into place (token file first). Returns the sidecar written.
   */
  async commit(info: { valFraction: number; sources: string[] }): Promise<DataSidecar> {
    try {
      await this.endDocument();
      if (this.textTokens === 0) {
        throw new DataError("the input holds no text: there is nothing to tokenize", {
          where: info.sources.length > 0 ? info.sources.join(", ") : this.target,
          hint: "Give input files that contain text.",
        });
      }
      const sidecar = u32Sidecar(this.tokenizer, this.file.tokenCount, info);
      await this.file.commit();
      await writeDataSidecar(this.target, sidecar);
      return sidecar;
    } catch (err) {
      await this.file.abort();
      throw err;
    }
  }

  /** Drops everything written; nothing is left at the output path. */
  async abort(): Promise<void> {
    this.pending = "";
    await this.file.abort();
  }

  private async encode(text: string): Promise<void> {
    if (text.length === 0) return;
    const ids = this.tokenizer.encode(text);
    if (ids.length === 0) return;
    if (!this.documentHasText) {
      this.documentHasText = true;
      if (this.tokenizer.endOfText !== undefined) await this.file.append([this.tokenizer.endOfText]);
    }
    this.textTokens += ids.length;
    await this.file.append(ids);
  }
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
