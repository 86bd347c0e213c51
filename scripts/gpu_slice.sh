#!/usr/bin/env bash
# One slice of long runs on the GPU machine, inside one device call (at most 10 minutes).
# GPU time comes in such slices; the store travels with them, so that trials cut off by one
# slice resume from their checkpoints in the next (docs/gpu-slices.md).
#
# On the GPU machine, from the project root, with .gpu/ (../shared/gpu/pack.sh) and store/gpu
# carried along:
#   bash scripts/gpu_slice.sh SECONDS SPEC [EXPERIMENT] [KEY=VALUES...] [sweep options]
#   bash scripts/gpu_slice.sh 510 specs/paper/gpu/sam_table1.mem seed=1 --device cuda
#
# The sweep is stopped as Ctrl-C stops it (SIGINT) SECONDS after it starts (killed 20 s later if
# it has not ended): running trials save a checkpoint and are recorded as interrupted. Into
# $OUT go slice.log (the machine, the sweep's log, the runs table) and the store, checkpoints
# included, as store-gpu.tar.gz.part-aa, -ab, … (a call brings back at most 8 files of 16 MiB).
# Back on the machine without a GPU, scripts/gpu_merge.sh takes them in. Exit status: the
# sweep's, except that being stopped at the slice's end is success.
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
[ -f .gpu/run.sh ] || { echo "no .gpu/run.sh: run ../shared/gpu/pack.sh and carry .gpu" >&2; exit 2; }
out=${OUT:?OUT must name the folder whose files come back}
seconds=$1
shift
store=store/gpu
log=$out/slice.log
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; echo "cores: $(nproc)"; } > "$log" 2>&1
# A checkout without store/gpu (a fresh clone: store/ is not committed) starts it from the
# committed runs of the GPU tables (docs/results/, the files with runs of `*_gpu` experiments),
# so that the sweep skips the trials already done.
if [ ! -d "$store" ]; then
  mapfile -t seeds < <(grep -l '"experiment": *"[a-z0-9_]*_gpu"' docs/results/*.json)
  [ ${#seeds[@]} -eq 0 ] || bash .gpu/run.sh --store "$store" import "${seeds[@]}" >> "$log" 2>&1
fi
mkdir -p "$store"
start=$(date +%s)
timeout -s INT -k 20 "$seconds" bash .gpu/run.sh --store "$store" sweep "$@" --quiet >> "$log" 2>&1
status=$?
echo "sweep: exit $status after $(($(date +%s) - start)) s (124: stopped at the slice's end)" | tee -a "$log"
bash .gpu/run.sh --store "$store" runs --all >> "$log" 2>&1
tar czf - "$store" | split -b 15M - "$out/store-gpu.tar.gz.part-"
# The next call carries the store unpacked, with .gpu/ (about 9 MB) and the tree, in 64 MiB.
size=$(du -sm "$store" | cut -f1)
echo "store: $size MiB on disk, $(($(cat "$out"/store-gpu.tar.gz.part-* | wc -c) / 1048576)) MiB packed" | tee -a "$log"
[ "$size" -lt 48 ] || echo "warning: store/gpu will not fit the next call's 64 MiB; run fewer trials at once (--jobs)" | tee -a "$log"
tail -n 25 "$log"
case $status in
  0 | 124) exit 0 ;;
  *) exit "$status" ;;
esac
