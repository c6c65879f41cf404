import { DataError } from "@kiln/contract";
import { AtomicOutputFile } from "../../fs/write-atomically.js";
import { type DataSidecar, u32Sidecar, writeDataSidecar } from "../data-sidecar.js";
import { TokenFileWriter } from "../token-file-writer.js";
import type { Tokenizer } from "../tokenizer.js";
import { EXAMPLE_START, TRAINED, exampleMaskPath } from "./example-mask.js";

/** Token ids of one part of an example, trained on or not. */
export interface TokenSegment {
  ids: readonly number[];
  trained: boolean;
}

const MASK_STAGING = 1 << 20;

/**
 * Writes an example file: the u32 token file, its loss mask (example-mask.ts)
 * and its sidecar. Nothing appears at the output paths until commit(); abort()
 * or a failure leaves none of the three.
 */
export class ExampleFileWriter {
  private readonly staging = new Uint8Array(MASK_STAGING);
  private staged = 0;
  private examples = 0;
  private trainedTokens = 0;

  private constructor(
    private readonly tokens: TokenFileWriter,
    private readonly mask: AtomicOutputFile,
    readonly tokenizer: Tokenizer,
  ) {}

  static async create(output: string, tokenizer: Tokenizer): Promise<ExampleFileWriter> {
    const tokens = await TokenFileWriter.create(output);
    try {
      return new ExampleFileWriter(tokens, await AtomicOutputFile.create(exampleMaskPath(output), { what: "loss mask", error: DataError }), tokenizer);
    } catch (err) {
      await tokens.abort();
      throw err;
    }
  }

  get target(): string {
    return this.tokens.target;
  }

  get tokenCount(): number {
    return this.tokens.tokenCount;
  }

  get exampleCount(): number {
    return this.examples;
  }

  /** Appends one example: its segments' ids in order, each token marked trained or not. */
  async add(segments: readonly TokenSegment[]): Promise<void> {
    let first = true;
    for (const { ids, trained } of segments) {
      await this.tokens.append(ids);
      for (let i = 0; i < ids.length; i++) {
        this.staging[this.staged++] = (trained ? TRAINED : 0) | (first ? EXAMPLE_START : 0);
        first = false;
        if (this.staged === this.staging.length) await this.flushMask();
      }
      if (trained) this.trainedTokens += ids.length;
    }
    if (!first) this.examples++;
  }

  /** Writes the sidecar and moves the token file, the mask and the sidecar into place, in that order. */
  async commit(info: { valFraction: number; sources: string[]; chatTemplate?: string }): Promise<DataSidecar> {
    try {
      if (this.examples === 0) {
        throw new DataError("no example is left to train on", { where: info.sources.join(", "), hint: "Check the input rows, --seq-len and --long-examples." });
      }
      await this.flushMask();
      const sidecar: DataSidecar = {
        ...u32Sidecar(this.tokenizer, this.tokens.tokenCount, info),
        examples: this.examples,
        trained_tokens: this.trainedTokens,
        ...(info.chatTemplate !== undefined ? { chat_template: info.chatTemplate } : {}),
      };
      await this.tokens.commit();
      await this.mask.commit();
      await writeDataSidecar(this.target, sidecar);
      return sidecar;
    } catch (err) {
      await this.abort();
      throw err;
    }
  }

  async abort(): Promise<void> {
    await this.tokens.abort();
    await this.mask.abort();
  }

  private async flushMask(): Promise<void> {
    if (this.staged === 0) return;
    await this.mask.append(this.staging.slice(0, this.staged));
    this.staged = 0;
  }
}
