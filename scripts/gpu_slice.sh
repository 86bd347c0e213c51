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
# a checkpoint and are recorded as interrupted. Into $OUT go the sweep's log with the machine and
# the runs table (slice.log), the finished runs as an export for `memctl import` (runs.json) and
# the store, checkpoints included, as store-gpu.tar.gz.part-aa, -ab, … (a call brings back at
# most 8 files of 16 MiB). Back on the machine without a GPU, scripts/gpu_merge.sh takes them in.
# The next slice carries the store again, within the call's 64 MiB with .gpu/: finished runs
# keep no checkpoint, so what counts is the trials in flight at the slice's end (--jobs).
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
[ -f .gpu/run.sh ] || { echo "no .gpu/run.sh: run ../shared/gpu/pack.sh and carry .gpu" >&2; exit 2; }
out=${OUT:?OUT must name the folder whose files come back}
seconds=$1
shift
store=store/gpu
mkdir -p "$store"
memctl() { bash .gpu/run.sh --store "$store" "$@"; }
log=$out/slice.log
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; echo "cores: $(nproc)"; } > "$log" 2>&1
start=$(date +%s)
timeout -s INT -k 60 "$seconds" bash .gpu/run.sh --store "$store" sweep "$@" --quiet >> "$log" 2>&1
status=$?
echo "sweep: exit $status after $(($(date +%s) - start)) s (124: stopped at the slice's end)" | tee -a "$log"
memctl runs --all >> "$log" 2>&1
memctl runs --all --format records > "$out/runs.json"
tar czf - "$store" | split -b 15M - "$out/store-gpu.tar.gz.part-"
size=$(cat "$out"/store-gpu.tar.gz.part-* | wc -c)
echo "store: $((size / 1048576)) MiB packed" | tee -a "$log"
[ "$size" -lt $((50 * 1048576)) ] || echo "warning: the store will not fit the next call's 64 MiB with .gpu/; run fewer trials at once" | tee -a "$log"
tail -n 25 "$log"
