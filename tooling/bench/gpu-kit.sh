#!/usr/bin/env bash
# Packs the GPU checks into one folder that runs on a GPU machine with neither the
# workspace nor Node installed: this machine's node, the built CUDA addon, the
# conformance runner and the GPU benchmark bundled with esbuild, and the PyTorch
# references. On the GPU machine, the folder's run.sh (`bash run.sh [OUTDIR]`) runs
# the conformance suite (every matmul path), the benchmark, and the suite again
# under compute-sanitizer (racecheck on attention and matmul, memcheck on all) when it is
# there; logs and JSON land in OUTDIR (default: out, in the folder).
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
cli="$dir/cli"
rm -rf "$cli" && mkdir -p "$cli/bin" "$cli/models"
bundle "$root/packages/cli/dist/bin/kiln.js" --splitting --external:@resvg/resvg-js --external:echarts --outdir="$cli/bin"
cp "$root/packages/kernels-wasm/dist/thread-worker-node.js" "$cli/bin/"
mkdir -p "$cli/bin/assets" && cp "$root"/packages/kernels-wasm/dist/assets/*.wasm "$cli/bin/assets/"
cp "$root/packages/cli/package.json" "$cli/"
cp "$root"/models/*.yaml "$cli/models/"
xz -T0 -6 -c "$addon" >"$dir/kiln_cuda.node.xz"
xz -T0 -6 -c "$(readlink -f "$(command -v node)")" >"$dir/node.xz"
cat >"$dir/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the packed GPU checks; see gpu-kit.sh.
set -uo pipefail
kit="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$kit/out}"
mkdir -p "$out" /tmp/kiln-kit
[ -x /tmp/kiln-kit/node ] || { xz -dc "$kit/node.xz" >/tmp/kiln-kit/node && chmod +x /tmp/kiln-kit/node; }
xz -dc "$kit/kiln_cuda.node.xz" >/tmp/kiln-kit/kiln_cuda.node
export KILN_CUDA_ADDON=/tmp/kiln-kit/kiln_cuda.node
node=/tmp/kiln-kit/node
# cuBLAS from pip (nvidia-cublas) where the system has none: where such a user points the loader.
if ! ldconfig -p 2>/dev/null | grep -q libcublasLt.so && ! ls /usr/local/cuda/lib64/libcublasLt.so* >/dev/null 2>&1; then
  pylib=$(python3 -c "import glob, os, nvidia; print(':'.join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + '/*/lib/libcublasLt.so*')})))" 2>/dev/null)
  [ -n "$pylib" ] && export LD_LIBRARY_PATH="$pylib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$out/nvidia-smi.txt"
echo "== conformance (default matmul path)"
"$node" "$kit/cuda-conformance.mjs" --isolate ${KIT_CONFORMANCE_ARGS:-} 2>&1 | tee "$out/conformance.log"
for path in kiln wmma simt; do
  echo "== conformance of matmul with KILN_MATMUL_PATH=$path"
  KILN_MATMUL_PATH=$path "$node" "$kit/cuda-conformance.mjs" --isolate --kernel matmul 2>&1 | tee "$out/conformance-matmul-$path.log"
done
for kernel in attentionForward attentionBackward; do
  echo "== conformance of $kernel with KILN_ATTENTION_PATH=wmma (the mma.sync kernels are the default)"
  KILN_ATTENTION_PATH=wmma "$node" "$kit/cuda-conformance.mjs" --isolate --kernel $kernel 2>&1 | tee "$out/conformance-$kernel-wmma.log"
done
if [ -n "${KIT_CLI:-}" ]; then
  echo "== kiln train on the GPU"
  mkdir -p /tmp/kiln-kit/run && cd /tmp/kiln-kit/run
  for dtype in bf16 f32; do
    "$node" "$kit/cli/bin/kiln.js" train -f "$kit/cli/models/nano-start.yaml" --target-device gpu --dtype $dtype --headless \
      --output-dir "checkpoints/$dtype" ${KIT_CLI_ARGS:-} 2>&1 | tee "$out/train-$dtype.log" | grep -v '^{"step":[0-9]*[1-9],' | tail -25
  done
  "$node" "$kit/cli/bin/kiln.js" sample --checkpoint checkpoints/bf16/final.safetensors --prompt "Once upon a time" 2>&1 | tee "$out/sample.log" | tail -8
  # Where a gpt2-small bf16 step spends its time, kernel by kernel (synchronised after each).
  echo "== kiln train --profile: gpt2-small bf16"
  "$node" "$kit/cli/bin/kiln.js" train -f "$kit/cli/models/gpt2-small.yaml" --target-device gpu --dtype bf16 --grad-accum 1 \
    --max-steps 8 --profile 5 --eval-interval 1000 --output-dir checkpoints/gpt2-small-profile 2>&1 | tee "$out/profile-gpt2-small.log" | tail -45
  cp checkpoints/gpt2-small-profile/profile.json "$out/profile-gpt2-small.json" 2>/dev/null || true
  cd - >/dev/null
fi
echo "== benchmark"
KILN_CUBLASLT_LOG=1 timeout "${KIT_BENCH_SECONDS:-400}" "$node" "$kit/cuda.mjs" ${KIT_BENCH_ARGS:-} 2>"$out/bench.err" | tee "$out/bench.json"
tail -5 "$out/bench.err"
if command -v compute-sanitizer >/dev/null && [ -z "${KIT_SKIP_SANITIZER:-}" ]; then
  # racecheck: the kernels that share tiles between warps through shared memory; memcheck: all.
  for run in racecheck:attentionForward racecheck:attentionBackward racecheck:matmul memcheck:; do
    tool=${run%%:*} kernel=${run#*:}
    echo "== conformance under compute-sanitizer $tool${kernel:+ ($kernel)}"
    timeout "${KIT_SANITIZER_SECONDS:-600}" compute-sanitizer --tool $tool --print-limit 20 "$node" "$kit/cuda-conformance.mjs" --passes 1 ${kernel:+--kernel $kernel} ${KIT_CONFORMANCE_ARGS:-} >"$out/$tool$kernel.log" 2>&1
    echo "$tool exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL|Invalid|hazard" "$out/$tool$kernel.log" | head -20
  done
fi
RUN
chmod +x "$dir/run.sh"
du -sh "$dir"
