export { GGML_TYPES, GGUF_DEFAULT_ALIGNMENT, type GgmlType, type GgufTensor, type GgufValue, type GgufValueType } from "./gguf-format.js";
export { readGgufHeader, type GgufContents, type GgufTensorInfo } from "./gguf-read.js";
export { writeGguf, type GgufTensorData } from "./gguf-write.js";
export { decodeGgml, encodeGgml } from "./ggml-encode.js";
export { exportGguf, type GgufExport } from "./export-gguf.js";
export { interleaveRopeRows } from "./gguf-tensor-map.js";
export { openGgufWeights, isGgufFile } from "./gguf-weights.js";
