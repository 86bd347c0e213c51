#!/usr/bin/env bash
# One slice of long runs on the GPU machine, inside one device call (at most 10 minutes).
# GPU time comes in such slices; the store travels with them, so that trials cut off by one
# slice resume from their checkpoints in the next (docs/gpu-slices.md).
#
# On the GPU machine, from the project root, with .gpu/ (../shared/gpu/pack.sh) and the store
# carried along (store/gpu.tar.gz, as scripts/gpu_merge.sh leaves it, or store/gpu):
#   bash scripts/gpu_slice.sh SECONDS SPEC [EXPERIMENT] [KEY=VALUES...] [sweep options] [+ SPEC ...]
#   bash scripts/gpu_slice.sh 510 specs/paper/gpu/sam_table1.mem seed=1 --device cuda
#   bash scripts/gpu_slice.sh 510 specs/paper/gpu/sam_table1.mem seed=1 --device cuda \
#     + specs/paper/gpu/nam_table1.mem seed=1 --device cpu --jobs 4 --threads 3
#
# Each sweep (a lone `+` separates them) runs at the same time as the others, into the same
# store: the GPU's trials and, beside them, trials for the machine's CPU cores, which the GPU's
# trials leave mostly idle. Each is stopped as Ctrl-C stops it (SIGINT) SECONDS after it starts
# (killed 20 s later if it has not ended): running trials save a checkpoint and are recorded as
# interrupted. Into $OUT go slice.log (the machine, the sweeps' logs, the runs table) and the
# store, checkpoints included, as store-gpu.tar.gz.part-aa, -ab, … (a call brings back at most
# 8 files of 16 MiB). Back on the machine without a GPU, scripts/gpu_merge.sh takes them in.
# Exit status: 0 when every sweep ended or was stopped at the slice's end, else the first
# other status.
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
[ -f .gpu/run.sh ] || { echo "no .gpu/run.sh: run ../shared/gpu/pack.sh and carry .gpu" >&2; exit 2; }
out=${OUT:?OUT must name the folder whose files come back}
seconds=$1
shift
store=store/gpu
log=$out/slice.log
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; echo "cores: $(nproc)"; } > "$log" 2>&1
# One unpacked binary for every sweep (run.sh rewrites its copy at each call, which a running
# process's binary refuses).
bin=/tmp/memctl-slice
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" .gpu/memctl.xz "$bin"
chmod +x "$bin"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
# The store carried packed (half its size on disk: more checkpoints fit a call's 64 MiB).
if [ ! -d "$store" ] && [ -f "$store.tar.gz" ]; then
  tar xzf "$store.tar.gz" && echo "store: unpacked from $store.tar.gz" >> "$log"
fi
# A checkout without the store (a fresh clone: store/ is not committed) starts it from the
# committed runs of the GPU tables (docs/results/, the files with runs of `*_gpu` experiments),
# so that the sweep skips the trials already done.
if [ ! -d "$store" ]; then
  mapfile -t seeds < <(grep -l '"experiment": *"[a-z0-9_]*_gpu"' docs/results/*.json)
  [ ${#seeds[@]} -eq 0 ] || "$bin" --store "$store" import "${seeds[@]}" >> "$log" 2>&1
fi
mkdir -p "$store"
# The sweeps' arguments, split at each lone `+`.
sweeps=() current=()
for a in "$@"; do
  if [ "$a" = + ]; then sweeps+=("${current[*]@Q}"); current=(); else current+=("$a"); fi
done
sweeps+=("${current[*]@Q}")
start=$(date +%s)
pids=()
for args in "${sweeps[@]}"; do
  eval "set -- $args"
  [ $# -gt 0 ] || { echo "an empty sweep between two +" >&2; exit 2; }
  timeout -s INT -k 20 "$seconds" "$bin" --store "$store" sweep "$@" --quiet >> "$log" 2>&1 &
  pids+=($!)
done
first_failure=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  status=$?
  echo "sweep $((i + 1)) (${sweeps[$i]}): exit $status after $(($(date +%s) - start)) s (124: stopped at the slice's end)" | tee -a "$log"
  case $status in
    0 | 124) ;;
    *) [ "$first_failure" -ne 0 ] || first_failure=$status ;;
  esac
done
"$bin" --store "$store" runs --all >> "$log" 2>&1
tar czf - "$store" | split -b 15M - "$out/store-gpu.tar.gz.part-"
# The next call carries the store packed (store/gpu.tar.gz, which gpu_merge.sh writes), with
# .gpu/ (about 9 MB) and the tree, in 64 MiB.
size=$(du -sm "$store" | cut -f1)
packed=$(($(cat "$out"/store-gpu.tar.gz.part-* | wc -c) / 1048576))
echo "store: $size MiB on disk, $packed MiB packed" | tee -a "$log"
[ "$packed" -lt 45 ] || echo "warning: the packed store (with the tree, 8 MB, and .gpu/, 9 MB) will not fit the next call's 64 MiB; run fewer trials at once (--jobs)" | tee -a "$log"
tail -n 25 "$log"
exit "$first_failure"
