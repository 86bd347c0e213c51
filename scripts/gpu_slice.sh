#!/usr/bin/env bash
# One slice of long runs on the GPU machine, inside one device call (at most 10 minutes).
# GPU time comes in such slices; the store travels with them, so that trials cut off by one
# slice resume from their checkpoints in the next (docs/gpu-slices.md).
#
# On the GPU machine, from the project root, with .gpu/ (../shared/gpu/pack.sh) and the store
# carried along:
#   bash scripts/gpu_slice.sh SECONDS SPEC [EXPERIMENT] [KEY=VALUES...] [sweep options]
#   bash scripts/gpu_slice.sh 540 specs/paper/gpu/sam_table1.mem --device cuda
#
# The sweep is stopped as Ctrl-C stops it (SIGINT) SECONDS after it starts: running trials save
# a checkpoint and are recorded as interrupted. Into $OUT go the store (store-gpu.tar.gz,
# checkpoints included), its finished runs as an export for `memctl import` (runs.json), the
# runs table (runs.txt), the sweep's log (sweep.log) and the machine (env.txt). Back on the
# machine without a GPU, scripts/gpu_merge.sh takes them in.
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
[ -f .gpu/run.sh ] || { echo "no .gpu/run.sh: run ../shared/gpu/pack.sh and carry .gpu" >&2; exit 2; }
out=${OUT:?OUT must name the folder whose files come back}
seconds=$1
shift
store=store/gpu
mkdir -p "$store"
memctl() { bash .gpu/run.sh --store "$store" "$@"; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; git rev-parse HEAD 2>/dev/null; } \
  > "$out/env.txt" 2>&1
start=$(date +%s)
timeout -s INT -k 60 "$seconds" bash .gpu/run.sh --store "$store" sweep "$@" --quiet > "$out/sweep.log" 2>&1
status=$?
echo "sweep: exit $status after $(($(date +%s) - start)) s (124: stopped at the slice's end)" | tee -a "$out/sweep.log"
tail -n 3 "$out/sweep.log"
memctl runs --all --format records > "$out/runs.json"
memctl runs --all > "$out/runs.txt" 2>&1
tar czf "$out/store-gpu.tar.gz" "$store"
ls -la "$out"
