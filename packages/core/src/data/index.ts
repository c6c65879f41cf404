export {
  detectTokenFileLayout,
  encodeLlmcHeader,
  isLlmcShard,
  LLMC_HEADER_BYTES,
  LLMC_U16_MAGIC,
  LLMC_U16_VERSION,
  LLMC_U32_MAGIC,
  LLMC_U32_VERSION,
  type TokenFileFormat,
  type TokenFileLayout,
} from "./token-file-format.js";
export { openTokenDataset, type TokenDataset, type OpenTokenDatasetOptions } from "./token-dataset.js";
export { splitTokens, windowsIn, DEFAULT_VAL_FRACTION, type DataSplit, type TokenSplit } from "./token-split.js";
export { WindowPermutation } from "./window-permutation.js";
export { BatchSampler, type BatchSamplerOptions, type BatchPlan, type SamplerCursor } from "./batch-sampler.js";
export { Prefetcher } from "./prefetcher.js";
export { getTokenizer, isTokenizerName, TOKENIZER_NAMES, type Tokenizer, type TokenizerName } from "./tokenizer.js";
export { openTokenizer, tokenizerOfCheckpoint } from "./open-tokenizer.js";
export { HfTokenizer } from "./hf-tokenizer.js";
export { gpt2TokenizerFiles } from "./gpt2-tokenizer-files.js";
export { TOKENIZER_FILE_NAMES, TOKENIZER_JSON, readTokenizerFiles, sameTokenizer, tokenizerIdentity, type TokenizerFiles } from "./tokenizer-files.js";
export { readDataSidecar, writeDataSidecar, dataSidecarPath, type DataSidecar } from "./data-sidecar.js";
export { TokenFileWriter } from "./token-file-writer.js";
export { TextTokenWriter } from "./text-token-writer.js";
export { convertU16TokenFile, readAsU16Tokens, u16ConversionCommand, u32PathFor, type ConvertU16Options, type U16Reading } from "./u16-token-file.js";
export { recognizeSignature, type Compression, type FileSignature } from "./file-signature.js";
export { tokenizeFiles, type SkippedInput, type TokenizeFilesOptions, type TokenizeProgress } from "./tokenize-files.js";
export { builtinCorpus, builtinCorpusSource, DEFAULT_BUILTIN_CORPUS_CHARS, type BuiltinCorpus, type BuiltinCorpusOptions } from "./builtin-corpus.js";
export { generateStories, generateStory, STORY_GRAMMAR_VERSION } from "./stories/story-generator.js";
export { StoryRandom } from "./stories/story-random.js";
export { prepareExamples, LONG_EXAMPLE_POLICIES, type LongExamplePolicy, type PrepareExamplesOptions, type PreparedExamples } from "./examples/prepare-examples.js";
export { EXAMPLE_FORMATS, type ExampleFormat } from "./examples/example-formats.js";
export { ChatTemplate, CHAT_ROLES, type ChatMessage, type ChatRole, type TextSegment } from "./examples/chat-template.js";
export { isExampleFile, readExampleRows, EXAMPLE_FILE_ENDINGS, type ExampleRow } from "./examples/example-rows.js";
export { EXAMPLE_START, TRAINED, exampleMaskPath, readExampleIndex, type ExampleIndex } from "./examples/example-mask.js";
export { ExampleFileWriter, type TokenSegment } from "./examples/example-file-writer.js";
