#!/usr/bin/env bash
# Takes in what scripts/gpu_slice.sh brought back from the GPU machine (docs/gpu-slices.md):
# the slice's store replaces store/gpu (it is that store, advanced by the slice), and its
# finished runs are imported into the paper store, each once.
#
#   scripts/gpu_merge.sh FILES_AT            # the device call's files_at folder
#   MEMCTL=target/release/memctl PAPER_STORE=store/paper scripts/gpu_merge.sh FILES_AT
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:?usage: scripts/gpu_merge.sh FILES_AT}
memctl=${MEMCTL:-target/release/memctl}
[ -x "$memctl" ] || cargo build --release --quiet
parts=("$files"/store-gpu.tar.gz.part-*)
if [ ! -s "$files/runs.json" ] || [ ! -s "${parts[0]}" ]; then
  echo "$files holds no runs.json or store parts: the slice did not finish; nothing changed" >&2
  exit 2
fi
# Unpack beside the old store, then swap, so that a broken archive leaves store/gpu as it was.
rm -rf store/.gpu-incoming && mkdir -p store/.gpu-incoming
cat "${parts[@]}" | tar xzf - -C store/.gpu-incoming
rm -rf store/gpu && mv store/.gpu-incoming/store/gpu store/gpu && rm -rf store/.gpu-incoming
"$memctl" --store "${PAPER_STORE:-store/paper}" import "$files/runs.json"
"$memctl" --store store/gpu runs
