/**
 * A tensor's bytes handed over a piece at a time (e.g. downloaded from a device
 * buffer), so that a file writer holds one small buffer rather than the whole tensor.
 */
export interface TensorByteSource {
  /** The tensor's size in bytes. */
  readonly byteLength: number;
  /**
   * Puts bytes [offset, offset + target.byteLength) of the tensor into `target`.
   * Writers ask for pieces in order; offsets and lengths are multiples of the
   * tensor's element size (see planSafetensorsLayout).
   */
  read(target: Uint8Array, offset: number): Promise<void>;
}

export function isTensorByteSource(data: unknown): data is TensorByteSource {
  return typeof data === "object" && data !== null && !ArrayBuffer.isView(data) && typeof (data as TensorByteSource).read === "function";
}
