#!/usr/bin/env bash
# Where a step's GPU time goes, kernel by kernel: Nsight Compute (ncu, on the GPU machine)
# times a window of an eager step's launches (a replayed graph hides its kernels from it),
# once per MEMCTL_CUDA setting. With .gpu/ (../shared/gpu/pack.sh) carried along:
#
#   bash scripts/gpu_kernel_times.sh [SPEC EXPERIMENT [KEY=VALUE...]]   # default: specs/bench/stm.mem stm_b
#   SKIP=2500 COUNT=3000 bash scripts/gpu_kernel_times.sh ...   # the window (default 7000, 3000)
#   FUSED=1 bash scripts/gpu_kernel_times.sh             # only the MEMCTL_CUDA settings named
#
# Writes $OUT/ncu_fused_{0,1}.csv (ncu's messages, then one quoted row per launch: kernel name,
# duration in ns; two files, so that it fits beside gpu_measure.sh's five in one call) and prints
# each kernel's total over the window, largest first (scripts/kernel_totals.py does the sum).
# ncu serialises and replays every launch it times, so only a window of 3000 launches, past the
# first step's warm-up, is timed (about a minute each).
set -uo pipefail
out=${OUT:?OUT must name the folder whose files come back}
[ -f .gpu/run.sh ] || { echo "no .gpu/run.sh: run ../shared/gpu/pack.sh and carry .gpu" >&2; exit 2; }
spec=${1:-specs/bench/stm.mem} experiment=${2:-stm_b}
bin=/tmp/memctl-cuda
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" .gpu/memctl.xz "$bin"
chmod +x "$bin"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
for fused in ${FUSED:-0 1}; do
  file=$out/ncu_fused_$(echo "$fused" | tr -c 'a-z0-9_\n' '_').csv   # plain characters: they come back
  # Eager steps (-cuda_graphs): Nsight times each launch of a replayed graph as one.
  MEMCTL_CUDA=$fused,-cuda_graphs timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
    --launch-skip "${SKIP:-7000}" --launch-count "${COUNT:-3000}" "$bin" bench "$spec" "$experiment" "${@:3}" --device cuda --iters 2 --warmup 1 \
    > "$file" 2>&1
  echo "== MEMCTL_CUDA=$fused: rc $?"
  python3 scripts/kernel_totals.py "$file" | head -25
done
