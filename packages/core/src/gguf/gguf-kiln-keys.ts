/**
 * Metadata keys kiln adds to the GGUF files it writes (llama.cpp ignores keys it does not
 * know): the kiln model config (JSON) and the tokenizer as checkpoints record them, so that
 * kiln sample runs the file with the model and tokenizer it was trained with.
 */
export const GGUF_KILN_MODEL = "kiln.model";
export const GGUF_KILN_TOKENIZER = "kiln.tokenizer";
export const GGUF_KILN_TOKENIZER_FILES = "kiln.tokenizer_files";
