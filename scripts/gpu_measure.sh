#!/usr/bin/env bash
# The GPU figures of docs/performance.md ("On the GPU"), measured on a GPU machine reached in
# calls of at most 10 minutes, with .gpu/ (../shared/gpu/pack.sh) carried along. Each part fits
# one call; parts meant to be compared run on the same machine, one after the other.
#
#   bash scripts/gpu_measure.sh quick      # the checks, STM's graph profile, every model with and
#                                          # without the fused kernels, 16-seed sweeps, PyTorch's
#                                          # reduce-overhead beside them (~5 min)
#   bash scripts/gpu_measure.sh packs      # packed trials (--pack): the checks, 16 seeds of
#                                          # quickstart_stm alone, in packs of 16 and 4 and by
#                                          # auto, each with its runs' table; SAM Table 1's d = 96
#                                          # row with 3 seeds alone and packed, 16 packed STM A
#                                          # against PyTorch's vmap ensemble (packs.txt; at most
#                                          # BUDGET seconds, default 560; about 4.5 min on an H200)
#   bash scripts/gpu_measure.sh unchecked  # the switches that wait for a GPU measurement (CHANGES,
#                                          # default: those doctor lists) against the default: the
#                                          # checks with all (each alone if that fails; on.txt),
#                                          # the models each acts on in two alternating rounds,
#                                          # SAM Table 1's evaluation passes (eval.txt), cold
#                                          # starts (cold.txt), the graph's memory nodes
#                                          # (mem_nodes.txt) (~4 min)
#   bash scripts/gpu_measure.sh memctl     # device check, step times, the CPU cores, sweeps (~5 min)
#   bash scripts/gpu_measure.sh torch      # PyTorch eager, torch.compile, reduce-overhead (~8 min)
#   bash scripts/gpu_measure.sh table      # docs/performance.md's GPU tables in one call (within
#                                          # 560 s): the checks, memctl by default, with every
#                                          # switch and with each unchecked one, the models on the
#                                          # GPU and the 16 cores, the sweep, then PyTorch
#   bash scripts/gpu_measure.sh changes    # as quick without PyTorch, plus the models each switch
#                                          # concerns with each unchecked switch added alone and
#                                          # each checked one left out alone: what each pays
#                                          # (~6-7 min; or in two calls:)
#   bash scripts/gpu_measure.sh changes-checks   # doctor --check with each switch (~3 min)
#   bash scripts/gpu_measure.sh changes-times    # what each switch pays, the sweeps (~3 min)
#
# Output goes to $OUT (env.txt, first_step.txt, doctor.txt, steps.txt, sweeps.txt; torch.txt;
# packs.txt; after the changes parts summary.txt, from scripts/changes_summary.py: each switch's
# check and what it pays), each line as the tool printed it. The per-command timeouts are
# ceilings for a hung command, not the expected times.
set -uo pipefail
out=${OUT:?OUT must name the folder whose files come back}
[ -f .gpu/run.sh ] || { echo "no .gpu/run.sh: run ../shared/gpu/pack.sh and carry .gpu" >&2; exit 2; }
export PYTHONUNBUFFERED=1 MEMCTL_CRASH_BACKTRACE=1
TIMEFORMAT="wall %R s"
models=("specs/examples/assoc.mem assoc_lstm" "specs/examples/nth_farthest.mem nfar_rmc"
        "specs/examples/nam_algorithmic.mem add_lsam" "specs/examples/nam_algorithmic.mem add_namtm"
        "specs/examples/pattern_completion.mem pc_pkm k=4")

memctl_part() {
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; } > "$out/env.txt" 2>&1
  { echo "== first step from process start"; time timeout 60 bash .gpu/run.sh bench specs/bench/stm.mem stm_a --device cuda --iters 1 --warmup 0; } \
    > "$out/first_step.txt" 2>&1
  timeout 120 bash .gpu/run.sh doctor --check > "$out/doctor.txt" 2>&1
  # Again with every switch but the options on, those that await a GPU measurement included.
  { echo "== MEMCTL_CUDA=1"; MEMCTL_CUDA=1 timeout 120 bash .gpu/run.sh doctor --check; } >> "$out/doctor.txt" 2>&1
  {
    for e in stm_a stm_b "stm_b batch=128"; do
      echo "== $e replayed"; timeout 60 bash .gpu/run.sh bench specs/bench/stm.mem $e --device cuda --iters 30
      echo "== $e eager"; MEMCTL_CUDA=-cuda_graphs timeout 60 bash .gpu/run.sh bench specs/bench/stm.mem $e --device cuda --iters 10
    done
    for e in stm_a stm_b; do
      echo "== $e cpu16"; timeout 60 bash .gpu/run.sh bench specs/bench/stm.mem $e --threads 16 --iters 10 --warmup 2
    done
    echo "== assoc_lstm cuda fused"; MEMCTL_CUDA=1 timeout 60 bash .gpu/run.sh bench specs/examples/assoc.mem assoc_lstm --device cuda --iters 20
    for x in "${models[@]}"; do
      echo "== $x cuda"; timeout 60 bash .gpu/run.sh bench $x --device cuda --iters 20
      echo "== $x cpu16"; timeout 60 bash .gpu/run.sh bench $x --threads 16 --iters 10 --warmup 2
    done
  } > "$out/steps.txt" 2>&1
  {
    for j in 1 default; do
      rm -rf /tmp/sweep; echo "== 16 seeds of quickstart_stm, 100 steps, jobs=$j"
      flag=(); [ "$j" != default ] && flag=(--jobs "$j")
      time timeout 120 bash .gpu/run.sh --store /tmp/sweep sweep specs/examples/assoc_small.mem quickstart_stm \
        seed=1..16 steps=100 --device cuda "${flag[@]}" --quiet 2>&1 | grep -v "^\[\|^✓"
    done
    rm -rf /tmp/quick; echo "== the quickstart on the GPU"
    time timeout 150 bash .gpu/run.sh --store /tmp/quick sweep specs/quickstart.mem --device cuda --quiet 2>&1 | grep -v "^\["
  } > "$out/sweeps.txt" 2>&1
}

torch_part() {
  {
    for cfg in "" "--d 96 --nq 8 --nr 96"; do
      for mode in "" default reduce-overhead; do
        echo "== stm_torch $cfg compile=${mode:-eager}"
        time timeout 240 python3 .gpu/stm_torch.py --device cuda $cfg ${mode:+--compile $mode}
      done
    done
  } > "$out/torch.txt" 2>&1
}

# The figures to take first, in one call (about 5 minutes): is every
# kernel right (the fused ones too), what does STM's captured step hold, what do the fused
# kernels gain (MEMCTL_CUDA=0: none, unset: the checked ones, 1: all), and where memctl
# stands against torch.compile on the same machine.
quick_part() {
  quick_checks
  quick_steps
  quick_sweeps
  {
    for cfg in "" "--d 96 --nq 8 --nr 96"; do
      echo "== stm_torch $cfg compile=reduce-overhead"
      time timeout 200 python3 .gpu/stm_torch.py --device cuda $cfg --compile reduce-overhead
    done
  } > "$out/torch.txt" 2>&1
}

# The switches `doctor` lists as waiting for a GPU measurement (kernels::cuda::switches), read from doctor.txt.
unchecked_changes() {
  sed -n 's/^ *\([a-z_0-9]*\) waits for a GPU measurement:.*/\1/p' "$out/doctor.txt" | sort -u
}

quick_checks() {
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; } > "$out/env.txt" 2>&1
  {
    timeout 120 bash .gpu/run.sh doctor --check
    echo "== MEMCTL_CUDA=1"; MEMCTL_CUDA=1 timeout 120 bash .gpu/run.sh doctor --check
  } > "$out/doctor.txt" 2>&1
  # Each unchecked change on its own (doctor lists them), so that a failure names its cause.
  for name in $(unchecked_changes); do
    echo "== MEMCTL_CUDA=$name"; MEMCTL_CUDA=$name timeout 120 bash .gpu/run.sh doctor --check
  done >> "$out/doctor.txt" 2>&1
}

quick_steps() {
  {
    echo "== stm_a graph profile, MEMCTL_CUDA=1"
    MEMCTL_CUDA=1,graph_profile timeout 60 bash .gpu/run.sh bench specs/bench/stm.mem stm_a --device cuda --iters 3
    for fused in 0 default 1; do
      for x in "specs/bench/stm.mem stm_a" "specs/bench/stm.mem stm_b" "${models[@]}"; do
        echo "== $x cuda fused=$fused"
        if [ "$fused" = default ]; then timeout 60 bash .gpu/run.sh bench $x --device cuda --iters 20
        else MEMCTL_CUDA=$fused timeout 60 bash .gpu/run.sh bench $x --device cuda --iters 20; fi
      done
    done
  } > "$out/steps.txt" 2>&1
}

# The changes on by default (kernels::cuda::switches, device::tuning), read from doctor.txt's first run.
checked_changes() {
  sed -n 's/^ *MEMCTL_CUDA ([^)]*) on: //p' "$out/doctor.txt" | head -1 | tr ',' '\n' \
    | sed -n 's/^ *\([a-z_0-9]*\)$/\1/p' | grep -vx cuda_graphs
}

# STM A and B with each unchecked change added alone, and each checked one left out alone
# (MEMCTL_CUDA=-name).
each_change_steps() {
  # An unchecked change is timed on NAM-TM and LSAM too (head_move and narrow_grads are theirs).
  local nam=("specs/examples/nam_algorithmic.mem add_lsam" "specs/examples/nam_algorithmic.mem add_namtm")
  # hoisted_inputs pays only with narrow_grads, which assembles the hoisted rows' gradients
  # in one concatenation (candle pads each and adds them): timed together as well.
  local pairs=()
  unchecked_changes | grep -qx hoisted_inputs && unchecked_changes | grep -qx narrow_grads \
    && pairs+=(hoisted_inputs,narrow_grads)
  for setting in $(unchecked_changes) "${pairs[@]}" $(checked_changes | sed 's/^/-/'); do
    local runs=("specs/bench/stm.mem stm_a" "specs/bench/stm.mem stm_b")
    [ "${setting:0:1}" != - ] && runs+=("${nam[@]}")
    case "$setting" in
      # The Kanerva machines' solve serves PKM only: its systems of 8 (k = 4) and 32 (k = 1).
      spd_solve) runs=("specs/examples/pattern_completion.mem pc_pkm k=4"
                       "specs/examples/pattern_completion.mem pc_pkm k=1") ;;
      # NAM-TM's own primitives, and LSAM's.
      tape_write|head_move|gru_cell) runs=("specs/examples/nam_algorithmic.mem add_namtm") ;;
      nam_write) runs=("specs/examples/nam_algorithmic.mem add_lsam") ;;
      l2_normalize) runs=("${nam[@]}") ;;
      # STM's outer products.
      outer) runs=("specs/bench/stm.mem stm_a" "specs/bench/stm.mem stm_b") ;;
    esac
    for x in "${runs[@]}"; do
      echo "== $x cuda fused=$setting"
      MEMCTL_CUDA=$setting timeout 60 bash .gpu/run.sh bench $x --device cuda --iters 20
    done
  done >> "$out/steps.txt" 2>&1
  # cuBLAS with a 16 KiB workspace (8 of them): too small for most split-K products, whose
  # reduction kernels are 419 of config A's captured nodes. An experiment, not a setting memctl uses.
  for e in stm_a stm_b; do
    echo "== specs/bench/stm.mem $e cuda CUBLAS_WORKSPACE_CONFIG=:16:8"
    CUBLAS_WORKSPACE_CONFIG=:16:8 MEMCTL_CUDA=graph_profile timeout 60 bash .gpu/run.sh bench specs/bench/stm.mem $e --device cuda --iters 20 \
      | grep -i "splitK\|median_ms\|nodes"
  done >> "$out/steps.txt" 2>&1
}

quick_sweeps() {
  {
    for fused in default 1; do
      rm -rf /tmp/sweep; echo "== 16 seeds of quickstart_stm, 100 steps, jobs=default, fused=$fused"
      [ "$fused" = 1 ] && export MEMCTL_CUDA=1
      time timeout 120 bash .gpu/run.sh --store /tmp/sweep sweep specs/examples/assoc_small.mem quickstart_stm \
        seed=1..16 steps=100 --device cuda --quiet 2>&1 | grep -v "^\[\|^✓"
    done
    unset MEMCTL_CUDA
    echo "== first step from process start"
    time timeout 60 bash .gpu/run.sh bench specs/bench/stm.mem stm_a --device cuda --iters 1 --warmup 0
  } > "$out/sweeps.txt" 2>&1
}

# Packed trials against trials alone, on one GPU: what `--pack auto` chooses and what packs gain
# (sweep::packs::AUTO_GPU_MAX_FLOPS rests on these), the rate of a packed SAM Table 1 row, and 16
# packed STM A against PyTorch's vmap ensemble of 16 (scripts/bench_stm_ensemble_torch.py). A
# "capture failed" line means the pack stepped eager.
packs_part() {
  local start=$SECONDS budget=${BUDGET:-560}
  # A command's ceiling is also what is left of the part's budget (BUDGET seconds, default 560),
  # so that a slow one costs the ones after it, never the file: what ran is written.
  capped() {
    local n=$1 left=$((budget - (SECONDS - start)))
    shift
    if [ "$left" -le 30 ]; then echo "skipped, the budget is spent: $*"; return; fi
    timeout $((left < n ? left : n)) "$@"
  }
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; } > "$out/env.txt" 2>&1
  capped 150 bash .gpu/run.sh doctor --check > "$out/doctor.txt" 2>&1
  local sam="specs/paper/gpu/sam_table1.mem sam_table1_l30_gpu d=96 transfer=true gates=true"
  {
    # Each sweep's runs too: a packed trial's final metrics against its own alone (they agree
    # as runs on two devices do, docs/performance.md "Packs on one GPU").
    for pack in off 16 4 auto; do
      rm -rf /tmp/sweep; echo "== 16 seeds of quickstart_stm, 100 steps, --pack $pack"
      time capped 120 bash .gpu/run.sh --store /tmp/sweep sweep specs/examples/assoc_small.mem quickstart_stm \
        seed=1..16 steps=100 --device cuda --pack $pack --quiet 2>&1 | grep -v "^\[\|^✓"
      capped 60 bash .gpu/run.sh --store /tmp/sweep runs --sort seed --format csv
    done
    for pack in 1 3; do
      echo "== SAM Table 1, length 30, d = 96, --pack $pack"
      capped 120 bash .gpu/run.sh bench $sam --device cuda --pack $pack --iters 30
    done
    for pack in 1 16; do
      echo "== stm_a --pack $pack"; capped 90 bash .gpu/run.sh bench specs/bench/stm.mem stm_a --device cuda --pack $pack --iters 30
    done
    for pack in off 3; do
      rm -rf /tmp/sam; echo "== SAM Table 1, length 30, d = 96, seeds 1-3, 400 steps, --pack $pack"
      time capped 180 bash .gpu/run.sh --store /tmp/sam sweep $sam seed=1..3 steps=400 \
        --device cuda --pack $pack --quiet 2>&1 | grep -v "^\[\|^✓"
    done
    # PyTorch last: compiling takes minutes.
    for mode in reduce-overhead ""; do
      echo "== PyTorch vmap ensemble of 16 STM A, compile=${mode:-eager}"
      time capped 240 python3 scripts/bench_stm_ensemble_torch.py --trials 16 --device cuda ${mode:+--compile $mode}
    done
  } > "$out/packs.txt" 2>&1
}

# docs/performance.md's GPU tables in one call: memctl and PyTorch on the same machine. Each PyTorch run
# starts only while the call has time left for it (compiling takes minutes), so a slow one
# costs the ones after it, not the memctl figures before it.
table_part() {
  local start=$SECONDS
  # The checks by default, with every change, and with each one that awaits a GPU alone, so
  # this call can turn one on.
  quick_checks
  {
    for e in stm_a stm_b "stm_b batch=128"; do
      for fused in default 1 $(unchecked_changes); do
        echo "== specs/bench/stm.mem $e cuda fused=$fused"
        if [ "$fused" = default ]; then timeout 60 bash .gpu/run.sh bench specs/bench/stm.mem $e --device cuda --iters 30
        else MEMCTL_CUDA=$fused timeout 60 bash .gpu/run.sh bench specs/bench/stm.mem $e --device cuda --iters 30; fi
      done
    done
    for x in "${models[@]}"; do
      echo "== $x cuda"; timeout 60 bash .gpu/run.sh bench $x --device cuda --iters 20
      echo "== $x cpu16"; timeout 60 bash .gpu/run.sh bench $x --threads 16 --iters 10 --warmup 2
    done
  } > "$out/steps.txt" 2>&1
  quick_sweeps
  {
    local runs=("--compile reduce-overhead" "--d 96 --nq 8 --nr 96 --compile reduce-overhead" ""
                "--d 96 --nq 8 --nr 96" "--compile default" "--d 96 --nq 8 --nr 96 --batch 128")
    for r in "${runs[@]}"; do
      local left=$((540 - (SECONDS - start)))
      [ "$left" -gt 45 ] || { echo "== stm_torch $r: skipped, $left s left"; continue; }
      echo "== stm_torch --device cuda $r"
      time timeout "$left" python3 .gpu/stm_torch.py --device cuda $r
    done
  } > "$out/torch.txt" 2>&1
}

# The unchecked changes against the default in a few minutes, so that the rest of a call can
# run a slice (scripts/gpu_slice.sh): is each right, and does it pay where it acts? CHANGES
# names them, space-separated (default: those that `memctl doctor` lists as waiting for a GPU
# measurement). Step times in two alternating rounds, so that a drift of the machine shows as a
# spread, not as a gain.
unchecked_part() {
  local changes=() listed
  if [ -n "${CHANGES:-}" ]; then
    read -ra changes <<< "$CHANGES"
  else
    listed=$(timeout 120 bash .gpu/run.sh doctor) || { echo "memctl doctor failed: $listed" | tee "$out/summary.txt"; exit 1; }
    read -ra changes <<< "$(sed -n 's/^ *\([a-z_0-9]*\) waits for a GPU measurement:.*/\1/p' <<< "$listed" | tr '\n' ' ')"
  fi
  if [ ${#changes[@]} -eq 0 ]; then
    echo "no switch waits for a GPU measurement (memctl doctor); CHANGES=\"a b\" times those named" \
      | tee "$out/summary.txt"
    exit 0
  fi
  local all; all=$(IFS=,; echo "${changes[*]}")
  local table1=(specs/paper/gpu/sam_table1.mem sam_table1_l30_gpu d=96 gates=true transfer=true)
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; } > "$out/env.txt" 2>&1
  # The checks by default and with every change; only when that fails, with each alone (which
  # names the cause). on.txt: the changes whose check passed, for the slice after to turn on.
  local passed=()
  {
    timeout 120 bash .gpu/run.sh doctor --check
    echo "== MEMCTL_CUDA=$all"
    if MEMCTL_CUDA=$all timeout 120 bash .gpu/run.sh doctor --check; then
      passed=("${changes[@]}")
    else
      for fused in "${changes[@]}"; do
        echo "== MEMCTL_CUDA=$fused"
        MEMCTL_CUDA=$fused timeout 120 bash .gpu/run.sh doctor --check && passed+=("$fused")
      done
    fi
  } > "$out/doctor.txt" 2>&1
  (IFS=,; echo "${passed[*]}") > "$out/on.txt"
  {
    # NAM-TM's and LSAM's examples by default: four changes that act on them went on together
    # (2026-11-27) after each was timed alone.
    for round in 1 2; do
      for x in "specs/examples/nam_algorithmic.mem add_namtm" "specs/examples/nam_algorithmic.mem add_lsam"; do
        echo "== $x cuda fused=default round=$round"
        timeout 60 bash .gpu/run.sh bench $x --device cuda --iters 20
      done
    done
    for change in "${changes[@]}"; do
      local runs=("specs/bench/stm.mem stm_a" "specs/bench/stm.mem stm_b" "specs/bench/stm.mem stm_b batch=128")
      case "$change" in
        # eval_graph acts on evaluation: eval.txt below.
        eval_graph) runs=() ;;
        # Loading the kernels' SASS acts on a process's first launches: cold.txt below.
        prebuilt_sass) runs=() ;;
        # The models that embed tokens: NAM's, and SAM Table 1's STM.
        one_hot_embedding) runs=("specs/examples/nam_algorithmic.mem add_namtm" "specs/examples/nam_algorithmic.mem add_lsam"
                                 "${table1[*]}") ;;
        # NAM-TM's head and tape.
        head_move_warps | tape_write_split) runs=("specs/examples/nam_algorithmic.mem add_namtm") ;;
        # PKM's read and write.
        kanerva_write | kanerva_address | lerp) runs=("specs/examples/pattern_completion.mem pc_pkm k=4") ;;
        # A pack's learned scalars, one per trial: STM's α over its memories.
        scale_rows) runs=("specs/bench/stm.mem stm_a --pack 16" "specs/examples/assoc_small.mem quickstart_stm --pack 16") ;;
        # tanh(M) in STM's gated write at every step, RMC's gate.
        tanh) runs=("specs/bench/stm.mem stm_a" "specs/bench/stm.mem stm_b" "specs/bench/stm.mem stm_a --pack 16"
                    "specs/examples/nth_farthest.mem nfar_rmc") ;;
      esac
      for round in 1 2; do
        for x in "${runs[@]}"; do
          for fused in default "$change"; do
            echo "== $x cuda fused=$fused round=$round"
            MEMCTL_CUDA=$([ "$fused" = default ] || echo "$fused") timeout 60 bash .gpu/run.sh bench $x --device cuda --iters 20
          done
        done
      done
    done
    # PKM with every change at once (kanerva_address and lerp act on it together).
    for round in 1 2; do
      echo "== specs/examples/pattern_completion.mem pc_pkm k=4 cuda fused=$all round=$round"
      MEMCTL_CUDA=$all timeout 60 bash .gpu/run.sh bench specs/examples/pattern_completion.mem pc_pkm k=4 \
        --device cuda --iters 20
    done
  } > "$out/steps.txt" 2>&1
  # SAM Table 1's evaluation passes, one d = 96 trial alone (bench --eval), by default and with
  # every change. Four trials at once are the slice's runs (their eval_seconds per pass, against
  # 16 s per 10 000 sequences on the H100 on 2026-11-26, docs/performance.md, "Sweeps on one
  # GPU"): a sweep here would spend minutes on the evaluations it measures.
  {
    for fused in default "$all"; do
      echo "== eval ${table1[*]} alone fused=$fused"
      MEMCTL_CUDA=$([ "$fused" = default ] || echo "$fused") timeout 120 bash .gpu/run.sh bench "${table1[@]}" \
        --device cuda --iters 5 --eval 3
    done
  } > "$out/eval.txt" 2>&1
  # A fresh machine's first trial: the driver's cache of compiled PTX off (CUDA_CACHE_DISABLE=1),
  # so that every module a run loads from PTX is compiled as on a machine that never ran memctl;
  # with prebuilt_sass (on by default) the modules load their SASS instead. The doctor's first
  # launch and the bench's first_step_ms (goal: the first step within 2 s of the trial's start).
  if [[ " ${changes[*]} " == *" prebuilt_sass "* ]]; then
    {
      for fused in -prebuilt_sass default; do
        local f; f=$([ "$fused" = default ] || echo "$fused")
        echo "== cold doctor fused=$fused"
        CUDA_CACHE_DISABLE=1 MEMCTL_CUDA=$f timeout 120 bash .gpu/run.sh doctor | grep -E "cuda|modules"
        echo "== cold stm_a first step fused=$fused"
        time CUDA_CACHE_DISABLE=1 MEMCTL_CUDA=$f timeout 120 bash .gpu/run.sh bench specs/bench/stm.mem stm_a \
          --device cuda --iters 1 --warmup 0
      done
    } > "$out/cold.txt" 2>&1
  fi
  # What a replayed step's memory nodes cost (docs/performance.md, "Where a step's time goes"):
  # STM A's captured graph by node kind, and the microbenchmark of a chain of kernels with and
  # without an allocation and a free per kernel (scripts/cuda/build_graph_mem_nodes.sh builds
  # it into .gpu/ after pack.sh; seconds to run).
  {
    echo "== stm_a graph profile"
    MEMCTL_CUDA=graph_profile timeout 60 bash .gpu/run.sh bench specs/bench/stm.mem stm_a --device cuda --iters 3
    if [ -x .gpu/graph_mem_nodes ]; then
      echo "== graph_mem_nodes 5000 50"; timeout 60 .gpu/graph_mem_nodes 5000 50
    else
      echo "no .gpu/graph_mem_nodes: bash scripts/cuda/build_graph_mem_nodes.sh after pack.sh"
    fi
  } > "$out/mem_nodes.txt" 2>&1
}

case "${1:-}" in
  memctl) memctl_part ;;
  unchecked) unchecked_part ;;
  table) table_part ;;
  torch) torch_part ;;
  packs) packs_part ;;
  quick) quick_part ;;
  changes) quick_checks; quick_steps; each_change_steps; quick_sweeps ;;
  # The same in two calls of about 3 minutes each, should one call's 10 minutes not hold it
  # all: first the checks and every model with none, the checked and all changes; then what
  # each change pays (each_change_steps reads the unchecked list from the first call's
  # doctor.txt, so the second runs the checks' first line again) and the sweeps.
  changes-checks) quick_checks; quick_steps ;;
  changes-times)
    { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; } > "$out/env.txt" 2>&1
    timeout 120 bash .gpu/run.sh doctor > "$out/doctor.txt" 2>&1
    : > "$out/steps.txt"; each_change_steps; quick_sweeps ;;
  *) sed -n '2,22p' "$0" >&2; exit 2 ;;
esac
# Each change's verdict and what it pays (scripts/changes_summary.py; after changes-times, run
# it here on the two calls' files together: the first call's doctor.txt has the checks).
case "$1" in
  changes* | table | unchecked) python3 scripts/changes_summary.py "$out" > "$out/summary.txt" 2>&1; cat "$out/summary.txt" ;;
esac
grep -h "median_ms\|^== \|wall \|check" "$out"/*.txt | cut -c1-200
