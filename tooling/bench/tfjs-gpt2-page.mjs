// A GPT-2 trained by TensorFlow.js's wasm backend, bundled into the kiln page by
// web-train-tfjs.mjs. The model is kiln's gpt2 arch: learned positions, pre-LayerNorm
// blocks (causal attention, GELU-tanh MLP of 4x width), final LayerNorm, the output
// layer tied to the token embedding; mean cross-entropy; Adam. Exposes
// globalThis.tfjsTrainGpt2(options), resolving to per-step seconds and losses.
import * as tf from "@tensorflow/tfjs-core";
// The gradients of tfjs-core's ops (the tfjs bundle registers them; tfjs-core alone does not).
import "@tensorflow/tfjs-core/dist/register_all_gradients";
import { getThreadsCount, setThreadsCount, setWasmPaths } from "@tensorflow/tfjs-backend-wasm";

async function start(wasmDir, threads) {
  setWasmPaths(wasmDir);
  setThreadsCount(threads);
  if (!(await tf.setBackend("wasm"))) throw new Error("tfjs could not start its wasm backend");
  await tf.ready();
  return { threads: getThreadsCount(), simd: await tf.env().getAsync("WASM_HAS_SIMD_SUPPORT"), multithread: await tf.env().getAsync("WASM_HAS_MULTITHREAD_SUPPORT") };
}

// Embedding lookup whose gradient scatters into the table (the wasm backend has no
// UnsortedSegmentSum, which tf.gather's own gradient needs).
const embed = tf.customGrad((table, ids) => ({
  value: tf.gather(table, ids),
  gradFunc: (dy) => [tf.scatterND(tf.expandDims(ids, 1), dy, table.shape), tf.zerosLike(ids)],
}));

function layerNorm(x, g, b) {
  const { mean, variance } = tf.moments(x, -1, true);
  return tf.add(tf.mul(tf.div(tf.sub(x, mean), tf.sqrt(tf.add(variance, 1e-5))), g), b);
}

function gelu(x) {
  const inner = tf.mul(Math.sqrt(2 / Math.PI), tf.add(x, tf.mul(0.044715, tf.pow(x, 3))));
  return tf.mul(tf.mul(0.5, x), tf.add(1, tf.tanh(inner)));
}

function params(m, seed) {
  const normal = (shape, i) => tf.variable(tf.randomNormal(shape, 0, 0.02, "float32", seed + i));
  const C = m.hiddenSize;
  const p = { wte: normal([m.vocabSize, C], 0), wpe: normal([m.seqLen, C], 1), lnfG: tf.variable(tf.ones([C])), lnfB: tf.variable(tf.zeros([C])), layers: [] };
  for (let l = 0; l < m.numLayers; l++) {
    p.layers.push({
      ln1G: tf.variable(tf.ones([C])), ln1B: tf.variable(tf.zeros([C])),
      wqkv: normal([C, 3 * C], 10 * l + 2), bqkv: tf.variable(tf.zeros([3 * C])),
      wo: normal([C, C], 10 * l + 3), bo: tf.variable(tf.zeros([C])),
      ln2G: tf.variable(tf.ones([C])), ln2B: tf.variable(tf.zeros([C])),
      w1: normal([C, 4 * C], 10 * l + 4), b1: tf.variable(tf.zeros([4 * C])),
      w2: normal([4 * C, C], 10 * l + 5), b2: tf.variable(tf.zeros([C])),
    });
  }
  return p;
}

function loss(m, p, ids, targets, mask) {
  const [B, T, C, H] = [m.batchSize, m.seqLen, m.hiddenSize, m.numHeads];
  const D = C / H;
  let x = tf.add(tf.reshape(embed(p.wte, ids), [B, T, C]), p.wpe);
  const heads = (t) => tf.transpose(tf.reshape(t, [B, T, H, D]), [0, 2, 1, 3]);
  for (const L of p.layers) {
    const h = layerNorm(x, L.ln1G, L.ln1B);
    const qkv = tf.add(tf.matMul(tf.reshape(h, [B * T, C]), L.wqkv), L.bqkv);
    const [q, k, v] = tf.split(tf.reshape(qkv, [B, T, 3 * C]), 3, -1).map(heads);
    const att = tf.softmax(tf.add(tf.mul(tf.matMul(q, k, false, true), 1 / Math.sqrt(D)), mask));
    const y = tf.reshape(tf.transpose(tf.matMul(att, v), [0, 2, 1, 3]), [B * T, C]);
    x = tf.add(x, tf.reshape(tf.add(tf.matMul(y, L.wo), L.bo), [B, T, C]));
    const h2 = tf.reshape(layerNorm(x, L.ln2G, L.ln2B), [B * T, C]);
    const mlp = tf.add(tf.matMul(gelu(tf.add(tf.matMul(h2, L.w1), L.b1)), L.w2), L.b2);
    x = tf.add(x, tf.reshape(mlp, [B, T, C]));
  }
  const logits = tf.matMul(tf.reshape(layerNorm(x, p.lnfG, p.lnfB), [B * T, C]), p.wte, false, true);
  return tf.losses.softmaxCrossEntropy(tf.oneHot(targets, m.vocabSize), logits);
}

/**
 * Trains `steps` steps of batchSize x seqLen random tokens; resolves to
 * { threads, simd, seconds: per-step wall times, losses }.
 */
globalThis.tfjsTrainGpt2 = async function tfjsTrainGpt2({ model, steps, wasmDir, threads, learningRate = 3e-4, seed = 1 }) {
  const info = await start(wasmDir, threads);
  const m = model;
  const p = params(m, seed);
  const optimizer = tf.train.adam(learningRate, 0.9, 0.95, 1e-8);
  const N = m.batchSize * m.seqLen;
  const rand = (s) => Int32Array.from({ length: N }, (_, i) => ((i + 1) * 2654435761 + s * 40503) % m.vocabSize >>> 0);
  const mask = tf.tidy(() => tf.mul(tf.sub(1, tf.linalg.bandPart(tf.ones([m.seqLen, m.seqLen]), -1, 0)), -1e9));
  const seconds = [];
  const losses = [];
  for (let s = 0; s < steps; s++) {
    const tokens = rand(s);
    const ids = tf.tensor1d(tokens, "int32");
    const targets = tf.tensor1d(Int32Array.from(tokens, (t, i) => tokens[(i + 1) % N]), "int32");
    const t0 = performance.now();
    const l = optimizer.minimize(() => loss(m, p, ids, targets, mask), true);
    losses.push(l.dataSync()[0]);
    seconds.push((performance.now() - t0) / 1000);
    tf.dispose([l, ids, targets]);
  }
  return { version: tf.version_core, ...info, seconds, losses };
};
