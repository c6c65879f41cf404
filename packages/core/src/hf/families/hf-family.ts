import type { ModelConfig, ModelConfigInput } from "../../model/config.js";
import type { HfConfigReader, Json } from "../hf-config-reader.js";

/**
 * One transformers class kiln reads and writes: its config.json keys in (the kiln model
 * they describe, refusing by key what kiln does not compute) and out (the keys
 * transformers writes for that class). Tensor names are kiln's own (ArchDef.params).
 */
export interface HfFamily {
  /** transformers' class, config.json's architectures[0]. */
  architecture: string;
  /** config.json's model_type. */
  modelType: string;
  read(r: HfConfigReader): ModelConfigInput;
  /** config.json for `m`; `common` holds the token ids and the dtype keys every family writes. */
  write(m: ModelConfig, common: Json): Json;
}
