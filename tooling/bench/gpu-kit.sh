#!/usr/bin/env bash
# Packs the GPU checks into one folder that runs on a GPU machine with neither the
# workspace nor Node installed: this machine's node, the built CUDA addon, the
# conformance runner, the GPU benchmarks and the kiln CLI bundled with esbuild, and the
# PyTorch references. On the GPU machine, the folder's run.sh (`bash run.sh [OUTDIR]`)
# runs the checks in stages that fit a time budget (see run.sh's header).
# Usage: bash tooling/bench/gpu-kit.sh DIR     (after pnpm turbo run build, with nvcc)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: gpu-kit.sh DIR}"
addon="$root/packages/kernels-cuda/build/Release/kiln_cuda.node"
[ -f "$addon" ] || { echo "gpu-kit: $addon is missing: build the CUDA addon first (pnpm turbo run build with nvcc)" >&2; exit 1; }
mkdir -p "$dir"
# Node ESM bundles; `require` defined for the CommonJS code bundled into them.
bundle() {
  "$root/node_modules/.bin/esbuild" "$@" --bundle --platform=node --format=esm --target=node20 --log-level=error \
    --banner:js="import { createRequire as __kilnRequire } from 'node:module'; const require = __kilnRequire(import.meta.url);"
}
for script in cuda-conformance cuda cuda-launch; do
  bundle "$root/tooling/bench/$script.mjs" --outfile="$dir/$script.mjs"
done
cp "$root/tooling/bench/cuda_kernels_torch.py" "$root/tooling/bench/train_step_torch.py" "$dir/"
# The kiln CLI as one bundle (chunks for what loads lazily; plots' ECharts and resvg
# stay out), with the wasm kernels and their worker where the bundle looks for them.
# From src/: dist/bin/kiln.js is a bundle already, one that leaves the wasm and CUDA
# packages to node_modules.
cli="$dir/cli"
rm -rf "$cli" && mkdir -p "$cli/bin" "$cli/models"
bundle "$root/packages/cli/src/bin/kiln.ts" --splitting --external:@resvg/resvg-js --external:echarts --outdir="$cli/bin"
cp "$root/packages/kernels-wasm/dist/thread-worker-node.js" "$cli/bin/"
mkdir -p "$cli/bin/assets" && cp "$root"/packages/kernels-wasm/dist/assets/*.wasm "$cli/bin/assets/"
cp "$root/packages/cli/package.json" "$cli/"
cp "$root"/models/*.yaml "$cli/models/"
xz -T0 -6 -c "$addon" >"$dir/kiln_cuda.node.xz"
xz -T0 -6 -c "$(readlink -f "$(command -v node)")" >"$dir/node.xz"
cat >"$dir/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the packed GPU checks (see gpu-kit.sh), most telling first, each stage cut to the
# time left of KIT_BUDGET seconds (default 540): conformance of every kernel on its
# default path; the gpt2-small bf16 step beside PyTorch and with its config's 8
# micro-batches a step, both again as CUDA graphs, the 8 micro-batches with the loss's
# logits in 256 MiB chunks (the earlier default), the embedding backward (ids uniform and
# as in text), and on the mma.sync attention with its defaults and its earlier settings
# (a table of the gpt2-small steps by setting follows);
# a device-timed profile of gpt2-small bf16; conformance of the other attention and
# matmul settings and of the kernels that take scratch with every call prepared;
# nano-start trained with and without --cuda-graphs (the same losses); attention (wgmma,
# mma.sync with each setting, WMMA, PyTorch); GEMMs; kiln's launch cost; the small
# models with and without CUDA graphs; racecheck of both attentions, memcheck of the
# wgmma attention, kiln's own matmul and the row kernels. KIT_FULL=1 adds a second
# conformance pass, gpt2-small bf16 on kiln's own matmuls, the other matmul paths and
# memcheck throughout.
# Logs and JSON land in OUTDIR (default: out, in the folder), seven files in all.
set -uo pipefail
kit="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$kit/out}"
mkdir -p "$out" /tmp/kiln-kit
end=$((SECONDS + ${KIT_BUDGET:-540}))
left() { local l=$((end - SECONDS)); [ $l -gt $1 ] && echo $1 || echo $((l > 5 ? l : 5)); }
stage() { echo "== [$SECONDS s] $1"; }
[ -x /tmp/kiln-kit/node ] || { xz -dc "$kit/node.xz" >/tmp/kiln-kit/node && chmod +x /tmp/kiln-kit/node; }
xz -dc "$kit/kiln_cuda.node.xz" >/tmp/kiln-kit/kiln_cuda.node
export KILN_CUDA_ADDON=/tmp/kiln-kit/kiln_cuda.node
node=/tmp/kiln-kit/node
# cuBLAS from pip (nvidia-cublas) where the system has none: where such a user points the loader.
if ! ldconfig -p 2>/dev/null | grep -q libcublasLt.so && ! ls /usr/local/cuda/lib64/libcublasLt.so* >/dev/null 2>&1; then
  pylib=$(python3 -c "import glob, os, nvidia; print(':'.join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + '/*/lib/libcublasLt.so*')})))" 2>/dev/null)
  [ -n "$pylib" ] && export LD_LIBRARY_PATH="$pylib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
passes=1; [ -n "${KIT_FULL:-}" ] && passes=2
stage "conformance, every kernel on its default path ($passes pass)"
timeout $(left 150) "$node" "$kit/cuda-conformance.mjs" --isolate --passes $passes --timeout-s 40 >"$out/conformance.log" 2>&1; echo "exit $?"
grep -E "^(FAIL|CRASH)" "$out/conformance.log" | head -20; tail -1 "$out/conformance.log" | grep -o '"totals":{[^}]*}\|"crashed":\[[^]]*\]'
bench() {  # bench NAME ARGS...: one part of cuda.mjs in its own process, figures as they come
  local name=$1; shift
  stage "cuda.mjs $*"
  echo "== $name: cuda.mjs $*" | tee -a "$out/bench.json" >>"$out/bench.log"
  timeout $(left 150) "$node" "$kit/cuda.mjs" --calls 10 --steps 5 "$@" >>"$out/bench.json" 2>"$out/bench-part.log"; echo "exit $?"
  cat "$out/bench-part.log" >>"$out/bench.log"
  grep '^{' "$out/bench-part.log" | grep -v '"cold_step_ms"' | cut -c1-400 | tail -12
  rm -f "$out/bench-part.log"
}
bench train --only train --models gpt2-small:bf16,gpt2-small-accum8:bf16
KILN_TORCH_PYTHON=false bench train-graphs --only train --models gpt2-small:bf16,gpt2-small-accum8:bf16 --graphs
# The loss's logits in the chunks of before (256 MiB: 4 of 2048 rows), against the default's one of 8192 rows.
KILN_TORCH_PYTHON=false bench train-loss-chunks-256 --only train --models gpt2-small-accum8:bf16 --loss-chunk-mib 256
bench embedding --only embedding
KILN_ATTENTION_PATH=mma KILN_TORCH_PYTHON=false bench train-mma-attention --only train --models gpt2-small:bf16
KILN_ATTENTION_PATH=mma KILN_ATTENTION_MMA_KEYS=32 KILN_ATTENTION_DQ=recompute KILN_TORCH_PYTHON=false bench train-mma-keys-32-recompute --only train --models gpt2-small:bf16
stage "summary: the gpt2-small bf16 steps above, by setting (median ms a step, MFU)"
"$node" -e '
  let stage = "";
  for (const line of require("fs").readFileSync(process.argv[1], "utf8").split("\n")) {
    if (line.startsWith("== ")) stage = line.slice(3).split(":")[0];
    else if (line.startsWith("{") && line.includes("\"model\":\"gpt2-small")) {
      let r = {};
      try { r = JSON.parse(line); } catch {}
      const perMicroBatch = r.accum > 1 ? `  (${(r.ms_per_step_median / r.accum).toFixed(2)} ms a micro-batch)` : "";
      if (r.ms_per_step_median && r.mfu !== undefined) console.log(`${stage.padEnd(26)} ${r.model.padEnd(18)} ${r.ms_per_step_median.toFixed(2).padStart(7)} ms  MFU ${(100 * r.mfu).toFixed(1)}%${perMicroBatch}`);
    }
  }' "$out/bench.log"
stage "kiln train --profile: gpt2-small bf16 (device timestamps)"
mkdir -p /tmp/kiln-kit/run && cd /tmp/kiln-kit/run
timeout $(left 100) "$node" "$kit/cli/bin/kiln.js" train -f "$kit/cli/models/gpt2-small.yaml" --target-device gpu --dtype bf16 --grad-accum 1 \
  --max-steps 6 --profile 3 --eval-interval 1000 --save-interval 1000 --headless --output-dir profile >"$out/profile.log" 2>&1; echo "exit $?"
grep -v '^{"step"' "$out/profile.log" | tail -45
cp profile/profile.json "$out/profile.json" 2>/dev/null
cd "$kit"
stage "conformance of matmul on kiln's own kernels (KILN_MATMUL_PATH=kiln: wgmma on sm_90), 2 passes"
KILN_MATMUL_PATH=kiln timeout $(left 45) "$node" "$kit/cuda-conformance.mjs" --isolate --kernel matmul --passes 2 >>"$out/conformance.log" 2>&1; echo "exit $?"
tail -1 "$out/conformance.log" | grep -o '"totals":{[^}]*}'
stage "conformance of attention on the mma.sync kernels (KILN_ATTENTION_PATH=mma: the default off sm_90), 2 passes"
KILN_ATTENTION_PATH=mma timeout $(left 45) "$node" "$kit/cuda-conformance.mjs" --isolate --kernel attentionForward,attentionBackward --passes 2 >>"$out/conformance.log" 2>&1; echo "exit $?"
tail -1 "$out/conformance.log" | grep -o '"totals":{[^}]*}\|"crashed":\[[^]]*\]'
stage "conformance of the mma.sync attention forward with key tiles of 32 (KILN_ATTENTION_MMA_KEYS=32), 1 pass"
KILN_ATTENTION_PATH=mma KILN_ATTENTION_MMA_KEYS=32 timeout $(left 30) "$node" "$kit/cuda-conformance.mjs" --isolate --kernel attentionForward --passes 1 >>"$out/conformance.log" 2>&1; echo "exit $?"
tail -1 "$out/conformance.log" | grep -o '"totals":{[^}]*}\|"crashed":\[[^]]*\]'
stage "conformance of the mma.sync attention backward with dQ recomputed (KILN_ATTENTION_DQ=recompute), 1 pass"
KILN_ATTENTION_PATH=mma KILN_ATTENTION_DQ=recompute timeout $(left 30) "$node" "$kit/cuda-conformance.mjs" --isolate --kernel attentionBackward --passes 1 >>"$out/conformance.log" 2>&1; echo "exit $?"
tail -1 "$out/conformance.log" | grep -o '"totals":{[^}]*}\|"crashed":\[[^]]*\]'
stage "conformance through prepare (each call's kernel scratch reserved when prepared, cuBLASLt's included), 1 pass"
timeout $(left 60) "$node" "$kit/cuda-conformance.mjs" --isolate --prepared --kernel matmul,sumRows,layerNormBackward,geluBackward,attentionBackward,embeddingBackward --passes 1 >>"$out/conformance.log" 2>&1; echo "exit $?"
tail -1 "$out/conformance.log" | grep -o '"totals":{[^}]*}\|"crashed":\[[^]]*\]'
stage "kiln train nano-start bf16 on the GPU, with and without --cuda-graphs: the same losses"
mkdir -p /tmp/kiln-kit/run && cd /tmp/kiln-kit/run
for graphs in "" --cuda-graphs; do
  timeout $(left 60) "$node" "$kit/cli/bin/kiln.js" train -f "$kit/cli/models/nano-start.yaml" --target-device gpu --dtype bf16 --max-steps 40 \
    --grad-accum 2 --eval-interval 1000 --save-interval 1000 --headless --output-dir "nano${graphs:+-graphs}" $graphs >"/tmp/kiln-kit/nano${graphs:+-graphs}.log" 2>&1
  echo "exit $? ${graphs:-(call by call)}"
  cat "/tmp/kiln-kit/nano${graphs:+-graphs}.log" >>"$out/conformance.log"
done
grep -o '"loss":[0-9.e+-]*' /tmp/kiln-kit/nano.log >/tmp/kiln-kit/a; grep -o '"loss":[0-9.e+-]*' /tmp/kiln-kit/nano-graphs.log >/tmp/kiln-kit/b
if [ ! -s /tmp/kiln-kit/a ]; then echo "no losses to compare"; tail -3 /tmp/kiln-kit/nano.log
elif cmp -s /tmp/kiln-kit/a /tmp/kiln-kit/b; then echo "losses equal ($(wc -l </tmp/kiln-kit/a) lines)"
else echo "LOSSES DIFFER"; diff /tmp/kiln-kit/a /tmp/kiln-kit/b | head -6; fi
grep -h "device " /tmp/kiln-kit/nano-graphs.log | head -1; grep -h '"it/s"' /tmp/kiln-kit/nano.log /tmp/kiln-kit/nano-graphs.log | tail -2 | grep -o '"it/s":[0-9.]*'
cd "$kit"
bench attention --only attention
bench gemm --only gemm
stage "the host's cost of a kernel call"
timeout $(left 40) "$node" "$kit/cuda-launch.mjs" >"$out/launch.json" 2>&1; echo "exit $?"
grep -A1 '"fill"\|"native fill"\|"matmul bf16 64^3"' "$out/launch.json" | grep -o '"[a-z 0-9^]*": {\|"host_us": [0-9.]*' | paste - - | head -4
KILN_TORCH_PYTHON=false bench graphs --only train --models nano:bf16,bench-small:bf16 --graphs
KILN_TORCH_PYTHON=false bench small --only train --models nano:bf16,bench-small:bf16
if command -v compute-sanitizer >/dev/null; then
  stage "racecheck: attention backward (bf16, mma.sync)"
  KILN_ATTENTION_PATH=mma timeout $(left 90) compute-sanitizer --tool racecheck --print-limit 10 "$node" "$kit/cuda-conformance.mjs" --passes 1 --kernel attentionBackward --filter bf16 >"$out/sanitizer.log" 2>&1; echo "exit $?"
  grep -E "SUMMARY|FAIL" "$out/sanitizer.log" | head -5
  stage "memcheck and racecheck: attention on the wgmma kernels (bf16; the default on sm_90)"
  KILN_ATTENTION_PATH=wgmma timeout $(left 60) compute-sanitizer --tool memcheck --print-limit 10 "$node" "$kit/cuda-conformance.mjs" --passes 1 --kernel attentionForward,attentionBackward --filter bf16 >>"$out/sanitizer.log" 2>&1; echo "exit $?"
  grep -E "ERROR SUMMARY|FAIL" "$out/sanitizer.log" | tail -3
  KILN_ATTENTION_PATH=wgmma timeout $(left 90) compute-sanitizer --tool racecheck --print-limit 10 "$node" "$kit/cuda-conformance.mjs" --passes 1 --kernel attentionBackward --filter bf16 >>"$out/sanitizer.log" 2>&1; echo "exit $?"
  grep -E "SUMMARY|FAIL" "$out/sanitizer.log" | tail -3
  stage "memcheck: matmul on kiln's own kernels"
  KILN_MATMUL_PATH=kiln timeout $(left 60) compute-sanitizer --tool memcheck --print-limit 10 "$node" "$kit/cuda-conformance.mjs" --passes 1 --kernel matmul >>"$out/sanitizer.log" 2>&1; echo "exit $?"
  grep -E "ERROR SUMMARY|FAIL" "$out/sanitizer.log" | tail -3
  stage "memcheck: the norms (residual sums, dResidual, dX's column sums), GELU/SiLU backwards (column sums), cross-entropy (dLogits in the forward)"
  timeout $(left 60) compute-sanitizer --tool memcheck --print-limit 10 "$node" "$kit/cuda-conformance.mjs" --passes 1 \
    --kernel layerNormForward,layerNormBackward,rmsNormForward,rmsNormBackward,geluBackward,siluBackward,crossEntropyForward >>"$out/sanitizer.log" 2>&1; echo "exit $?"
  grep -E "ERROR SUMMARY|FAIL" "$out/sanitizer.log" | tail -3
fi
if [ -n "${KIT_FULL:-}" ]; then
  KILN_MATMUL_PATH=kiln KILN_TORCH_PYTHON=false bench own-kernels --only train --models gpt2-small:bf16
  for path in mma wmma simt; do
    stage "conformance of matmul with KILN_MATMUL_PATH=$path"
    KILN_MATMUL_PATH=$path timeout $(left 60) "$node" "$kit/cuda-conformance.mjs" --isolate --kernel matmul >>"$out/conformance.log" 2>&1; echo "exit $?"
  done
  stage "memcheck over the whole suite"
  timeout $(left 600) compute-sanitizer --tool memcheck --print-limit 20 "$node" "$kit/cuda-conformance.mjs" --passes 1 >>"$out/sanitizer.log" 2>&1; echo "exit $?"
  grep -E "ERROR SUMMARY" "$out/sanitizer.log" | tail -2
fi
stage done
RUN
chmod +x "$dir/run.sh"
du -sh "$dir"
