/**
 * Names users bring from other trainers (Hugging Face Trainer, nanoGPT, GPT-2 configs) for
 * settings kiln calls otherwise, by the spelling with underscores. Unknown keys and flags
 * with these names are answered with kiln's key instead of a spelling-based guess
 * (eval_steps is trainer.eval_interval, not the nearer-looking eval_iters).
 */
export const OTHER_NAMES: Readonly<Record<string, string>> = {
  logging_steps: "trainer.log_interval",
  eval_steps: "trainer.eval_interval",
  save_steps: "trainer.save_interval",
  save_total_limit: "trainer.max_checkpoints",
  load_best_model_at_end: "trainer.save_best",
  max_length: "trainer.seq_len",
  max_seq_length: "trainer.seq_len",
  block_size: "trainer.seq_len",
  per_device_train_batch_size: "trainer.batch_size",
  train_batch_size: "trainer.batch_size",
  gradient_accumulation_steps: "trainer.gradient_accumulation",
  num_train_epochs: "trainer.num_epochs",
  max_iters: "trainer.max_steps",
  warmup_iters: "trainer.warmup_steps",
  lr: "trainer.learning_rate",
  min_lr: "trainer.min_learning_rate",
  lr_scheduler_type: "trainer.lr_schedule",
  max_grad_norm: "trainer.grad_clip",
  adam_beta1: "trainer.beta1",
  adam_beta2: "trainer.beta2",
  adam_epsilon: "trainer.eps",
  output_dir: "trainer.checkpoint_dir",
  out_dir: "trainer.checkpoint_dir",
  n_layer: "model.num_layers",
  num_hidden_layers: "model.num_layers",
  n_head: "model.num_heads",
  num_attention_heads: "model.num_heads",
  num_key_value_heads: "model.kv_heads",
  n_embd: "model.hidden_size",
  d_model: "model.hidden_size",
  n_positions: "model.max_seq_len",
  max_position_embeddings: "model.max_seq_len",
  tie_word_embeddings: "model.tie_embeddings",
  rms_norm_eps: "model.norm_eps",
  layer_norm_epsilon: "model.norm_eps",
};

/** kiln's key (`section.key`) for a name from another trainer, written with dashes or underscores. */
export function kilnKeyFor(name: string): string | undefined {
  return OTHER_NAMES[name.replace(/^-+/, "").replace(/-/g, "_").toLowerCase()];
}
