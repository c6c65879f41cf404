// The metadata keys and tensor-name prefixes of kiln checkpoints, defined once (no file I/O here: browser bundles import it).

/** Optimizer state tensor names: torch.optim.AdamW's state keys under the parameter's name. */
export const EXP_AVG = "optimizer.exp_avg.";
export const EXP_AVG_SQ = "optimizer.exp_avg_sq.";

/** Metadata keys every kiln checkpoint carries. */
export const META_STEP = "kiln.step";
export const META_MODEL = "kiln.model";
/** The tokenizer the training data was prepared with: a built-in name or a folder tokenizer's identity (tokenizer-files.ts). */
export const META_TOKENIZER = "kiln.tokenizer";
/** A folder tokenizer's files (a JSON object, file name -> text): sampling and export need no other copy. */
export const META_TOKENIZER_FILES = "kiln.tokenizer_files";
/** The chat template (Jinja text) the run's chat examples were rendered with: kiln sample --chat and kiln export use it. */
export const META_CHAT_TEMPLATE = "kiln.chat_template";
/** The weights a LoRA run's base came from (its --init-from, as given): an exported adapter names it as its base_model_name_or_path. */
export const META_BASE_MODEL = "kiln.base_model";
/** The run's config file as YAML text: a run resumed from the checkpoint, or a page that loads it, reads its settings from here. */
export const META_CONFIG = "kiln.config";
/** What the run trained on (a file, or the built-in corpus), for model cards. */
export const META_DATA = "kiln.data";
/** The dtype the run trained in (its tensors here are f32 either way: master weights under bf16/f16). */
export const META_DTYPE = "kiln.dtype";
/** Steps whose update was skipped: f16 overflow or non-finite values (AdamW's bias correction counts applied updates only). */
export const META_SKIPPED_STEPS = "kiln.skipped_steps";
/** f16: the dynamic loss scaler's scale and its finite steps since the scale last changed. */
export const META_LOSS_SCALE = "kiln.loss_scale";
export const META_LOSS_SCALE_GOOD_STEPS = "kiln.loss_scale_good_steps";
/** Data-parallel ranks that trained the run (absent: 1). A run resumes with as many, or with others over the same global batch rows. */
export const META_WORLD_SIZE = "kiln.world_size";
/** Rows of a global micro-batch: ranks x batch size. Another number of ranks may resume the run when it keeps this. */
export const META_GLOBAL_BATCH_ROWS = "kiln.global_batch_rows";
/** Where the training data stands: the sampler's cursor ({epoch, index}, over every rank's windows). */
export const META_DATA_CURSOR = "kiln.data_cursor";
/** The data cursor of every rank, by rank (JSON array): each rank resumes from its own. */
export const META_DATA_CURSORS = "kiln.data_cursors";
/** The run's lowest val_loss so far and its step (JSON {step, loss}), and the evaluations since: --save-best and --early-stop go on after --resume. */
export const META_BEST_VAL_LOSS = "kiln.best_val_loss";
export const META_EVALS_SINCE_BEST = "kiln.evals_since_best";
