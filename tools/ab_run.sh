#!/bin/bash
# ab_run.sh: the runner inside tools/pack_ab.sh's archive, on the GPU host. Runs CMD (a bash
# command line) with these helpers, logs in $OUT (the device tool's output folder) or ./logs:
#   ops [FILTER]              gpu_ops_test (FILTER: OPSLIB_TEST_FILTER, cmocka's glob)
#   san TOOL FILTER           the same under compute-sanitizer TOOL (memcheck, racecheck)
#   grid "NAME NAME .." ARGS  bench/attn_grid.py with each library in turn (interleave them:
#                             "new main new main"), --json into the logs; ARGS to each run
#   gemm "NAME NAME .." ARGS  bench/gemm_grid.py the same way
#   gridcmp NEW BASE [ARGS]   bench/grid_cmp.py over this call's runs: NEW's time over BASE's a
#                             shape and the geomean; status 0 where NEW is faster (ARGS: --kind
#                             gemm where both grids ran, --markdown, --below X)
#   ncu_one NAME ARGS         the 3rd attention launch of `attn_grid.py --one ARGS` (KERNEL B S
#                             HQ HKV D CAUSAL) with library NAME under ncu --clock-control
#                             none: time, scheduler statistics, stalls a issue (no_instruction:
#                             instruction fetch), L1/TEX and shared-memory bank conflicts, DRAM
#                             bytes, the tensor pipe. KERNEL torch:cudnn profiles PyTorch's
#                             cuDNN backend instead (NCU_KERNEL: the kernel-name regex, sdpa)
#   ncu_gemm NAME ARGS        the same for the 3rd GEMM launch of `gemm_grid.py --one ARGS`
#                             (KERNEL M N K: B as nn.Linear stores it, bf16)
#   host NAME [ARGS]          bench/host_launch.cu built against library NAME and run (ARGS:
#                             its own, `default` for the legacy stream): host time per call
#   refetch NAME [ARGS]       bench/code_refetch.py with library NAME (--json into the logs,
#                             code_refetch_NAME_<i>.json, i counting this call's runs of NAME):
#                             each call after a 200 KB kernel against after a 3 KB one
#   sass CUBIN..              tools/sass_stats.py --loops on each cubin's cuobjdump listing
#                             (nvcc -cubin here, carried beside the archive): HGMMA shapes,
#                             R2UR, BRA.DIV, the loops' instructions, which ptxas -v does not say
#   ab/ab_run.sh 'ops & (san memcheck "sdpa*") & wait; grid "new main new main"; gridcmp new main'
set -u
B=$(cd "$(dirname "$0")" && pwd)
L=${OUT:-$B/logs}
mkdir -p "$L"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$B/python"
ops() {
  local log="$L/ops${1:+_$1}.log"
  log=${log//\*/_}
  OPSLIB_TEST_FILTER="${1:-}" "$B/bin/gpu_ops_test" > "$log" 2>&1
  echo "ops ${1:-all}: rc $?"
  grep -E "^\[  (PASSED|FAILED)  \]|^\[  FAILED  \]" "$log" | tail -n 8
}
san() {
  local log="$L/$1_$2.log"
  log=${log//\*/_}
  OPSLIB_TEST_FILTER="$2" compute-sanitizer --tool "$1" --error-exitcode 99 "$B/bin/gpu_ops_test" > "$log" 2>&1
  echo "$1 $2: rc $?"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$log" | tail -n 4
  grep -m 1 -A 12 -E "^========= (Error|Warning|Race|Invalid|Program hit)" "$log"
}
# The first free $L/STEM_<i>.json: a call's earlier runs stay, whichever command wrote them.
fresh_json() {
  local i=1
  while [ -e "$L/$1_$i.json" ]; do i=$((i + 1)); done
  echo "$L/$1_$i.json"
}
grid_of() {
  local script=$1 libs=$2 json
  shift 2
  for l in $libs; do
    json=$(fresh_json "${script%.py}_$l")
    echo "=== $l ($(basename "$json")) $(date -u +%H:%M:%SZ)"
    OPSLIB_LIBRARY="$B/lib/$l.so" python3 "$B/bench/$script" --json "$json" "$@"
  done
}
grid() { grid_of attn_grid.py "$@"; }
gemm() { grid_of gemm_grid.py "$@"; }
gridcmp() { python3 "$B/bench/grid_cmp.py" "$L" "$@"; }
ncu_one() { ncu_of attn_grid.py "${NCU_KERNEL:-sdpa}" "$@"; }
ncu_gemm() { ncu_of gemm_grid.py "${NCU_KERNEL:-gemm_sm90}" "$@"; }
ncu_of() {
  local script=$1 regex=$2 lib=$3 s
  shift 3
  local m=gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
  m=$m,smsp__warps_eligible.avg.per_cycle_active,smsp__warps_active.avg.per_cycle_active
  for s in barrier long_scoreboard short_scoreboard wait math_pipe_throttle no_instruction branch_resolving; do
    m=$m,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
  done
  m=$m,l1tex__throughput.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed
  m=$m,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
  m=$m,dram__bytes_read.sum,dram__bytes_write.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
  m=$m,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,launch__registers_per_thread
  m=$m,sm__warps_active.avg.pct_of_peak_sustained_active
  OPSLIB_LIBRARY="$B/lib/$lib.so" ncu --clock-control none --kernel-name "regex:$regex" --launch-skip 2 \
    --launch-count 1 --metrics "$m" python3 "$B/bench/$script" --one "$@" 2>&1 | grep -E "Context|__" |
    sed 's/  */ /g'
}
host() {
  local lib=$1 d="$B/host_$1"
  shift
  mkdir -p "$d"
  ln -sf "$B/lib/$lib.so" "$d/libopslib.so"
  nvcc -O2 -std=c++17 -arch=sm_90a -I"$B/include" "$B/bench/host_launch.cu" -L"$d" -lopslib -o "$d/host_launch" &&
    LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH" "$d/host_launch" "$@" 2>&1 | tee "$L/host_$lib.log"
}
refetch() {
  local lib=$1
  shift
  OPSLIB_LIBRARY="$B/lib/$lib.so" python3 "$B/bench/code_refetch.py" --json "$(fresh_json "code_refetch_$lib")" "$@"
}
sass() {
  local f
  for f in "$@"; do
    echo "== $f"
    cuobjdump -sass "$f" | python3 "$B/tools/sass_stats.py" --loops | tee "$L/sass_$(basename "$f" .cubin).txt"
  done
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null
echo "start $(date -u +%H:%M:%SZ)"
eval "$1"
echo "end $(date -u +%H:%M:%SZ)"
