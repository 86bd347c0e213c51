#!/usr/bin/env bash
# The search benchmark: specs/bench/search_stm.mem's three searches (the grid with ASHA, TPE
# with ASHA, the full grid), each in a fresh store of its own (the grid and the grid with ASHA
# share their trials, which one store would run once), each followed by its report. The
# figures in docs/search.md come from its output.
#
#   scripts/bench_search.sh [MEMCTL] [FOLDER]
#
# MEMCTL defaults to target/release/memctl (build it with `cargo build --release --locked`);
# the stores go in FOLDER (default: a new temporary folder). Each search runs two trials at a
# time on one thread each.
set -euo pipefail
memctl=${1:-target/release/memctl}
folder=${2:-$(mktemp -d)}
spec=specs/bench/search_stm.mem
echo "stores in: $folder"
# The pruned searches first and the full grid last, each reported as it ends: the grid's
# step count is known without running it (configurations × seeds × steps).
for e in grid_asha tpe_asha grid; do
  start=$(date +%s)
  "$memctl" --store "$folder/$e" sweep "$spec" "$e" --jobs 2 --threads 1 --quiet
  echo "$e: $(( $(date +%s) - start )) s"
  echo
  "$memctl" --store "$folder/$e" search-report "$spec" "$e"
  echo
done
