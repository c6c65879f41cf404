const WHITESPACE = /\s/;

/**
 * Where `text` can be cut so that tokenizing the two halves apart gives the same
 * ids as tokenizing it whole: just after a line break that is followed by a
 * non-space character (GPT-2, cl100k and o200k never merge across that point),
 * or, failing that, before a single space between two words. Searches backwards
 * from the end; returns 0 when there is no such point.
 */
export function findSafeCut(text: string): number {
  for (let i = text.length - 1; i > 0; i--) {
    if (text.charCodeAt(i - 1) === 10 && !WHITESPACE.test(text[i])) return i;
  }
  for (let i = text.length - 2; i > 0; i--) {
    if (text.charCodeAt(i) === 32 && !WHITESPACE.test(text[i - 1]) && !WHITESPACE.test(text[i + 1])) return i;
  }
  return 0;
}
