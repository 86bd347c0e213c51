#!/usr/bin/env bash
# The search benchmark: specs/bench/search_stm.mem's three searches (the full grid, the grid
# with ASHA, TPE with ASHA), each in a fresh store of its own (the grid and the grid with ASHA
# share their trials, which one store would run once), then each one's report. The figures in
# docs/search.md come from its output.
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
for e in grid grid_asha tpe_asha; do
  start=$(date +%s)
  "$memctl" --store "$folder/$e" sweep "$spec" "$e" --jobs 2 --threads 1 --quiet
  echo "$e: $(( $(date +%s) - start )) s"
done
for e in grid grid_asha tpe_asha; do
  echo
  "$memctl" --store "$folder/$e" search-report "$spec" "$e"
done
