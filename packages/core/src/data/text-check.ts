/** Above this share of characters that are not UTF-8 (U+FFFD from the decoder), a file is not text. */
export const MAX_INVALID_UTF8_SHARE = 0.01;
/** The share is judged once this many characters were seen (and at the end, whatever the count). */
const JUDGE_AFTER_CHARS = 1 << 16;

const NUL = 0x0000;
const REPLACEMENT = 0xfffd;

/**
 * Watches the decoded text of one file for signs that it is not text: a NUL
 * character (text files have none; binary formats and UTF-16 have many), or
 * more than MAX_INVALID_UTF8_SHARE of its characters not valid UTF-8.
 */
export class TextCheck {
  private chars = 0;
  private invalid = 0;
  private nulAt: number | undefined;

  /** Adds the next piece of the file's text, as a non-fatal UTF-8 TextDecoder gave it. */
  see(text: string): void {
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === REPLACEMENT) this.invalid++;
      else if (c === NUL && this.nulAt === undefined) this.nulAt = this.chars + i;
    }
    this.chars += text.length;
  }

  /**
   * What the text seen so far is when it is not text, as a noun phrase ("binary data (...)"),
   * or undefined. `whole`: judge the share of invalid characters whatever the count (the
   * file, or the sample of it, ended).
   */
  problem(whole: boolean): string | undefined {
    if (this.nulAt !== undefined) return `binary data (it holds NUL bytes, the first at character ${this.nulAt + 1})`;
    if ((whole || this.chars >= JUDGE_AFTER_CHARS) && this.invalid > this.chars * MAX_INVALID_UTF8_SHARE) {
      return `binary data or text in another encoding than UTF-8 (${this.invalid} of its first ${this.chars} characters are not valid UTF-8; iconv -t UTF-8 converts text)`;
    }
    return undefined;
  }
}
