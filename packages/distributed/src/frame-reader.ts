/**
 * The wire format between ranks: a 16-byte header of four little-endian u32
 * (type, collective sequence number, sender rank, payload bytes) and then the
 * payload. TCP keeps each connection's frames in order.
 */
export const HEADER_BYTES = 16;

export const enum FrameType {
  /** leaf -> rank 0 on connecting: JSON {rank, worldSize}. */
  Hello = 1,
  /** rank 0 -> leaf once every rank has connected. */
  Welcome = 2,
  /** leaf -> rank 0: this rank's part of collective `seq`. */
  Part = 3,
  /** rank 0 -> leaf: the result of collective `seq`. */
  Result = 4,
  /** rank 0 -> leaf: the group failed; JSON {rank, message} names the rank that caused it. */
  Abort = 5,
}

export interface Frame {
  type: FrameType;
  seq: number;
  rank: number;
  payload: Uint8Array;
}

export function frameHeader(type: FrameType, seq: number, rank: number, bytes: number): Uint8Array {
  const header = new Uint8Array(HEADER_BYTES);
  const view = new DataView(header.buffer);
  view.setUint32(0, type, true);
  view.setUint32(4, seq, true);
  view.setUint32(8, rank, true);
  view.setUint32(12, bytes, true);
  return header;
}

/** Cuts a byte stream into frames; each payload is a fresh, 8-byte-aligned array (reductions view it as f32 or f64). */
export class FrameReader {
  private header = new Uint8Array(HEADER_BYTES);
  private headerFill = 0;
  private current: Omit<Frame, "payload"> | undefined;
  private payload = new Uint8Array(0);
  private payloadFill = 0;

  constructor(private readonly onFrame: (frame: Frame) => void) {}

  push(chunk: Uint8Array): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.current === undefined) {
        const take = Math.min(HEADER_BYTES - this.headerFill, chunk.length - at);
        this.header.set(chunk.subarray(at, at + take), this.headerFill);
        this.headerFill += take;
        at += take;
        if (this.headerFill < HEADER_BYTES) return;
        const view = new DataView(this.header.buffer);
        this.current = { type: view.getUint32(0, true), seq: view.getUint32(4, true), rank: view.getUint32(8, true) };
        this.payload = new Uint8Array(view.getUint32(12, true));
        this.payloadFill = 0;
        this.headerFill = 0;
      }
      const take = Math.min(this.payload.length - this.payloadFill, chunk.length - at);
      this.payload.set(chunk.subarray(at, at + take), this.payloadFill);
      this.payloadFill += take;
      at += take;
      if (this.payloadFill === this.payload.length) {
        const frame = { ...this.current, payload: this.payload };
        this.current = undefined;
        this.onFrame(frame);
      }
    }
  }
}
