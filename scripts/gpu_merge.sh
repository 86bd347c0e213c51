#!/usr/bin/env bash
# Takes in what scripts/gpu_slice.sh brought back from the GPU machine (docs/gpu-slices.md):
# the slice's store replaces store/gpu (it is that store, advanced by the slice; packed, it is
# store/gpu.tar.gz, which the next slice carries), and its finished runs are imported into the
# paper store, each once.
#
#   scripts/gpu_merge.sh FILES_AT            # the device call's files_at folder
#   MEMCTL=path/to/memctl PAPER_STORE=store/paper scripts/gpu_merge.sh FILES_AT
#
# Merge each slice once, in order: the store it brings is the newest only if no later slice
# has been merged.
set -euo pipefail
files=$(cd "${1:?usage: scripts/gpu_merge.sh FILES_AT}" && pwd)
cd "$(dirname "$0")/.."
if [ -z "${MEMCTL:-}" ]; then
  cargo build --release --quiet
  MEMCTL=target/release/memctl
fi
shopt -s nullglob
parts=("$files"/store-gpu.tar.gz.part-*)
[ ${#parts[@]} -gt 0 ] || { echo "$files holds no store parts: the slice did not finish; nothing changed" >&2; exit 2; }
if ! cat "${parts[@]}" | tar tzf - > /dev/null 2>&1; then
  echo "$files: the store's parts do not make a whole archive (${#parts[@]} parts); nothing changed" >&2
  exit 2
fi
# Unpack beside the old store, then swap.
trap 'rm -rf store/.gpu-incoming' EXIT
rm -rf store/.gpu-incoming && mkdir -p store/.gpu-incoming
cat "${parts[@]}" | tar xzf - -C store/.gpu-incoming
rm -rf store/gpu && mv store/.gpu-incoming/store/gpu store/gpu
# The same store packed, for the next slice to carry (half its size on disk).
cat "${parts[@]}" > store/gpu.tar.gz.new && mv store/gpu.tar.gz.new store/gpu.tar.gz
"$MEMCTL" --store store/gpu runs --all --format records | "$MEMCTL" --store "${PAPER_STORE:-store/paper}" import -
"$MEMCTL" --store store/gpu runs
