#!/usr/bin/env bash
# Builds scripts/cuda/graph_mem_nodes.cu into .gpu/graph_mem_nodes (carried to the GPU machine
# with .gpu/), statically linked against the CUDA runtime of NVIDIA's CUDA 13.0 wheels, the
# toolkit ../shared/gpu/pack.sh uses (the machine's driver is CUDA 13.0). Run from the project
# root after pack.sh; set NVCC to use another compiler.
set -euo pipefail
nvcc=${NVCC:-/root/.cache/cuda-pypi-13.0/nvidia/cu13/bin/nvcc}
[ -x "$nvcc" ] || { echo "no nvcc at $nvcc: run ../shared/gpu/pack.sh first (it fetches the CUDA 13.0 wheels) or set NVCC" >&2; exit 2; }
mkdir -p .gpu
lib=$(dirname "$(dirname "$nvcc")")/lib
"$nvcc" -O2 -arch=sm_90 -cudart static -L"$lib" -o .gpu/graph_mem_nodes scripts/cuda/graph_mem_nodes.cu
echo "built .gpu/graph_mem_nodes"
