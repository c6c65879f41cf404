export * from "./checkpoint-keys.js";
export * from "./safetensors-dtype.js";
export {
  parseSafetensorsHeader,
  readSafetensorsHeaderLength,
  SAFETENSORS_LENGTH_BYTES,
  SAFETENSORS_MAX_HEADER_BYTES,
  SAFETENSORS_METADATA_KEY,
  type SafetensorsHeader,
  type SafetensorsSource,
  type SafetensorsTensorInfo,
} from "./safetensors-header.js";
export {
  planSafetensorsLayout,
  type SafetensorsTensorInput,
  type StreamedTensorInput,
  type SafetensorsLayout,
  type PlannedTensor,
} from "./safetensors-layout.js";
export type { TensorByteSource } from "./tensor-byte-source.js";
export { deviceTensorSource } from "./device-tensor-source.js";
export { encodeSafetensors, encodeStreamedSafetensors, decodeSafetensors, type SafetensorsTensor, type DecodedSafetensors } from "./safetensors-codec.js";
export { writeSafetensors, readSafetensors } from "./safetensors-file.js";
export { openSafetensors, SafetensorsReader } from "./safetensors-reader.js";
