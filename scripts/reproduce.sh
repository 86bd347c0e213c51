#!/usr/bin/env bash
# Runs every paper-reproduction spec in specs/paper/ into the store `store/paper`, then writes
# docs/results.md from that store. Trials already done are skipped, so an interrupted run picks
# up where it stopped. Expected time on a 2-core machine: about 4 hours (each spec states its own).
# The runs behind the committed tables (docs/results/*.json) are imported first, so a fresh
# clone only runs what they lack; the GPU tables' runs come from scripts/gpu_merge.sh.
#
#   scripts/reproduce.sh            # everything
#   MEMCTL=path/to/memctl scripts/reproduce.sh
set -euo pipefail
cd "$(dirname "$0")/.."
memctl=${MEMCTL:-}
if [ -z "$memctl" ]; then
  cargo build --release --quiet
  memctl=target/release/memctl
fi
store=${STORE:-store/paper}
shopt -s nullglob
data=(docs/results/*.json)
if [ ${#data[@]} -gt 0 ]; then
  "$memctl" --store "$store" import "${data[@]}"
fi
# The timing sweep runs alone (one trial at a time) so that trials do not slow each other.
"$memctl" --store "$store" sweep specs/paper/pkm.mem pkm_timing --jobs 1 --threads 1 --quiet
for spec in sam_table1 sam_table2 sam_fig2 sam_table3 nam_table1 rmc_table1 pkm pkm_fig2; do
  "$memctl" --store "$store" sweep "specs/paper/$spec.mem" --jobs 2 --threads 1 --quiet || true
done
# SAM Table 4 reads the bAbI tasks, which are not shipped (specs/paper/sam_babi.mem says where
# to get them); it runs when they are in data/babi/en-valid-10k.
if [ -d data/babi/en-valid-10k ]; then
  "$memctl" --store "$store" sweep specs/paper/sam_babi.mem --jobs 2 --threads 1 --quiet || true
fi
"$memctl" --store "$store" results specs/paper/results.yaml -o docs/results.md --data-dir docs/results/
