#!/usr/bin/env bash
# Packs the GPU checks into one folder that runs on a GPU machine with neither the
# workspace nor Node installed: this machine's node, the built CUDA addon, the
# conformance runner and the GPU benchmark bundled with esbuild, and the PyTorch
# references. On the GPU machine: `bash DIR/run.sh [OUTDIR]` runs the conformance
# suite, the benchmark, and the conformance suite again under compute-sanitizer
# (memcheck) when it is there; logs and JSON land in OUTDIR (default DIR/out).
# Usage: bash tooling/bench/gpu-kit.sh DIR     (after pnpm turbo run build, with nvcc)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: gpu-kit.sh DIR}"
addon="$root/packages/kernels-cuda/build/Release/kiln_cuda.node"
[ -f "$addon" ] || { echo "gpu-kit: $addon is missing: build the CUDA addon first (pnpm turbo run build with nvcc)" >&2; exit 1; }
mkdir -p "$dir"
esbuild="$root/node_modules/.bin/esbuild"
for script in cuda-conformance cuda; do
  "$esbuild" "$root/tooling/bench/$script.mjs" --bundle --platform=node --format=esm --target=node20 --log-level=warning \
    --banner:js="import { createRequire as __kilnRequire } from 'node:module'; const require = __kilnRequire(import.meta.url);" \
    --outfile="$dir/$script.mjs"
done
cp "$root/tooling/bench/cuda_kernels_torch.py" "$root/tooling/bench/train_step_torch.py" "$dir/"
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
[ -f /tmp/kiln-kit/kiln_cuda.node ] || xz -dc "$kit/kiln_cuda.node.xz" >/tmp/kiln-kit/kiln_cuda.node
export KILN_CUDA_ADDON=/tmp/kiln-kit/kiln_cuda.node
node=/tmp/kiln-kit/node
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$out/nvidia-smi.txt"
echo "== conformance"
"$node" "$kit/cuda-conformance.mjs" --isolate ${KIT_CONFORMANCE_ARGS:-} 2>&1 | tee "$out/conformance.log"
echo "== benchmark"
timeout "${KIT_BENCH_SECONDS:-400}" "$node" "$kit/cuda.mjs" ${KIT_BENCH_ARGS:-} 2>"$out/bench.err" | tee "$out/bench.json"
tail -5 "$out/bench.err"
if command -v compute-sanitizer >/dev/null && [ -z "${KIT_SKIP_SANITIZER:-}" ]; then
  echo "== conformance under compute-sanitizer memcheck"
  timeout "${KIT_SANITIZER_SECONDS:-600}" compute-sanitizer --tool memcheck --print-limit 20 "$node" "$kit/cuda-conformance.mjs" --passes 1 ${KIT_CONFORMANCE_ARGS:-} >"$out/memcheck.log" 2>&1
  echo "memcheck exit $?"; grep -E "ERROR SUMMARY|FAIL|Invalid" "$out/memcheck.log" | head -20
fi
RUN
chmod +x "$dir/run.sh"
du -sh "$dir"
