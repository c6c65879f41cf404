import { endianness } from "node:os";
import { DataError } from "@kiln/contract";
import { AtomicOutputFile } from "../fs/write-atomically.js";

const HOST_IS_LITTLE_ENDIAN = endianness() === "LE";
const DEFAULT_STAGING_TOKENS = 1 << 20;

/**
 * Writes a raw little-endian u32 token file atomically: ids are staged in one
 * reused buffer and appended in large writes; the file appears at its path only
 * on commit(), and abort() (or any failure) leaves nothing behind.
 */
export class TokenFileWriter {
  private readonly staging: Uint32Array;
  private staged = 0;
  private written = 0;

  private constructor(
    private readonly output: AtomicOutputFile,
    stagingTokens: number,
  ) {
    this.staging = new Uint32Array(stagingTokens);
  }

  static async create(target: string, stagingTokens = DEFAULT_STAGING_TOKENS): Promise<TokenFileWriter> {
    return new TokenFileWriter(await AtomicOutputFile.create(target, { what: "token file", error: DataError }), stagingTokens);
  }

  get target(): string {
    return this.output.target;
  }

  /** Tokens appended so far. */
  get tokenCount(): number {
    return this.written + this.staged;
  }

  async append(ids: ArrayLike<number>): Promise<void> {
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (!Number.isInteger(id) || id < 0 || id > 0xffffffff) throw new RangeError(`token id ${id} is not a u32`);
      this.staging[this.staged++] = id;
      if (this.staged === this.staging.length) await this.flush();
    }
  }

  /** Drops every token after the first `tokenCount`; appending goes on from there. */
  async truncate(tokenCount: number): Promise<void> {
    if (!(Number.isSafeInteger(tokenCount) && tokenCount >= 0 && tokenCount <= this.tokenCount)) {
      throw new RangeError(`cannot truncate ${this.tokenCount} tokens to ${tokenCount}`);
    }
    if (tokenCount >= this.written) {
      this.staged = tokenCount - this.written;
      return;
    }
    this.staged = 0;
    await this.output.truncate(tokenCount * 4);
    this.written = tokenCount;
  }

  async commit(): Promise<void> {
    await this.flush();
    await this.output.commit();
  }

  async abort(): Promise<void> {
    await this.output.abort();
  }

  private async flush(): Promise<void> {
    if (this.staged === 0) return;
    const bytes = new Uint8Array(this.staging.buffer, 0, this.staged * 4);
    if (!HOST_IS_LITTLE_ENDIAN) {
      const view = new DataView(bytes.buffer, 0, bytes.byteLength);
      for (let i = 0; i < this.staged; i++) view.setUint32(i * 4, this.staging[i], true);
    }
    await this.output.append(bytes);
    this.written += this.staged;
    this.staged = 0;
  }
}
