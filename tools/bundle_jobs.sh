#!/bin/bash
# jobs.sh: the GPU bundle's runner in pieces (packed by tools/pack_gpu_bundle.sh), for hosts
# that give a command a few minutes at a time. run_all.sh --sanitizer does everything in one
# go; on the H100 that is about 16 minutes, half of it gpu_ops_test under racecheck. Here the
# same runs are named jobs, each under its own time limit, all under one deadline:
#
#   gpu_bundle/jobs.sh [JOB[@SECONDS]]...      (DEADLINE=SECONDS: the whole call, default 570)
#
#   ops                gpu_ops_test (every GPU kernel against the CPU, and the coverage check)
#   ops-memcheck       gpu_ops_test under compute-sanitizer memcheck
#   ops-racecheck=GLOB gpu_ops_test's tests matching GLOB (cmocka's OPSLIB_TEST_FILTER) under
#                      racecheck, e.g. ops-racecheck='gemm*'; without =GLOB, every test
#   others             run_all.sh --sanitizer for every other test binary, the demo and python_test
#   compare            compare.py --families sdpa (COMPARE_ARGS replaces the arguments)
#   host               host_launch.cu (host time per call from C, beside the launches it is made
#                      of; built with the host's nvcc), then host_cost.py: host time per call
#                      from PyTorch (builds opslib._ext first)
#   block              llama_block.py: a decoder block with opslib.torch vs PyTorch eager / compile
#
# Logs go to $OUT/jobs (the device tool's output folder) or ./logs/jobs; each job prints one
# summary line: "job: exit N, S s, <its summary>". A job given fewer than 20 s (by its own
# limit or by the deadline) is skipped and says so. Times on the H100 (2026-11-23, bundle
# 80b7c86): ops 143 s, ops-memcheck 155 s, others 122 s, compare 40 s; racecheck of gemm
# 168 s, gemm_tf32 60 s, gemm_many_tiles 30 s, sdpa 74 s, and of rows*, reductions,
# elementwise*, dropout*, every* and sdpa_* together about 200 s. Since the split-KV tests
# (2026-11-24) racecheck of every sdpa* test takes more than 330 s (sdpa_kv_cache alone 66 s):
# give it its own call. Since gpu_soak_test (2026-11-24: 35 s plainly, 25 s under the two
# sanitizers) others takes about 170 s. Since sdpa_split_merge (2026-11-25) ops takes about
# 250 s and ops-memcheck more than 200 s (give each its own limit, or run ops, others and a
# filtered ops-memcheck side by side: three jobs.sh in the background, then wait; 2026-11-25:
# ops 251 s, others 231 s). Since gpu_run explains every call before it runs it (2026-11-26,
# session 33) ops takes 314 s beside ops-memcheck and others, 414 s beside a racecheck of
# sdpa*; that racecheck did not finish in 565 s (it was in `sdpa`, run alone 57 s), and of
# sdpa_backward* the reproducibility test outlasted 415 s beside another racecheck: give
# ops-racecheck=sdpa, =sdpa_backward and ='sdpa_backward_is_reproducible' their own jobs.
# Session 34 (2026-11-26): ops 324-369 s beside filtered memcheck / racecheck runs of
# gpu_smoke_test and sdpa_backward*; host 32 s (host_launch.cu's build and run included).
# Session 35 (2026-11-26/27): ops 292-339 s (85 kernels) beside others (217-256 s), or beside
# ops-memcheck / ops-racecheck of one sdpa test (21-58 s each); the whole ops-memcheck 243 s
# beside others.
# Session 36 (2026-11-27): ops 366 s beside memcheck of sdpa_backward* (42 s) then racecheck
# of sdpa_backward (97 s); others 282 s alone; others beside a racecheck of
# sdpa_backward_is_reproducible: neither finished in 400 s (give that racecheck a call alone).
# Session 37 (2026-11-27): ops 289-304 s, beside others (242 s) or beside memcheck of
# sdpa_backward* (46 s) then racecheck of sdpa_backward (73 s); racecheck of
# sdpa_backward_is_reproducible alone 467 s (it fits one call by itself, nothing beside it).
# Session 38 (2026-11-27): ops 312-330 s beside memcheck of sdpa (22 s) or of sdpa_kv_cache
# (10 s) then racecheck of sdpa_kv_cache (133 s) and sdpa_split_merge (37 s).
# Session 39 (2026-11-27): ops 269-271 s beside memcheck of sdpa_split_merge (1-2 s) then of
# sdpa_kv_cache (15-18 s), and racecheck of sdpa_split_merge (32-33 s) then of sdpa_kv_cache
# (104-110 s): the five jobs fit one call of 280 s.
# Session 40 (2026-11-27): the same five jobs took 350 s (ops 350 s; racecheck of
# sdpa_split_merge 37 s, of sdpa_kv_cache 136 s); ops 262 s beside memcheck of
# sdpa_split_merge (1 s); host 31 s.
# Session 41 (2026-11-27): ops 315 s beside memcheck (2 s) then racecheck (63 s) of
# sdpa_split_merge; memcheck of sdpa* (8 tests) 185 s beside racecheck of sdpa_kv_cache
# (127 s) and test_native_torch.py under memcheck.
# Session 42 (2026-11-27): ops 308 s beside memcheck of rope*, sdpa_split_merge and
# sdpa_kv_cache, then racecheck of sdpa_split_merge and rope_cache_append (106 s in all),
# then the Python tests (38 s); later ops 289 s beside memcheck and racecheck of
# sdpa_split_merge and sdpa_kv_cache, and 354 s beside memcheck of those and rope*, a
# racecheck of sdpa_split_merge and the Python tests.
# Three calls cover the rest:
#   jobs.sh ops compare others;  jobs.sh ops-memcheck ops-racecheck='sdpa*' ops-racecheck='every*';
#   jobs.sh ops-racecheck='gemm*' ops-racecheck='rows*' ops-racecheck=reductions \
#           ops-racecheck='elementwise*' ops-racecheck='dropout*'
#
# Racecheck with `--kernel-name` leaving the clustered attention kernels (sdpa_sm90_kernel<..,
# 2>) uninstrumented stops at their first launch with "The Sanitizer failed to handle a
# hardware exception" (H100, 2026-11-23), while instrumented they pass, as they do plainly
# and under memcheck with or without the filter: run racecheck on them unfiltered.
set -u
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPSLIB_LIBRARY="$here/lib/libopslib.so" PYTHONPATH="$here/python"
logs="${OUT:-$here/logs}/jobs"
mkdir -p "$logs"
ops="$here/bin/tests_gpu_gpu_ops_test"
deadline=${DEADLINE:-570}
t0=$(date +%s)
echo "bundle: $(cat "$here/BUILD_INFO")"

summary() { # the log's last summary lines (else its last line), on one line
  { grep -E "^\[  (PASSED|FAILED)  \]|^\[ (RUNS|COVERAGE) |(ERROR|RACECHECK) SUMMARY|^bundle:|^compute-sanitizer:|^sdpa  " "$1" ||
    tail -n 1 "$1"; } | sed 's/^=* *//' | tail -n "${2:-3}" | awk 'NR > 1 { printf " | " } { printf "%s", $0 }'
}

for spec in "$@"; do
  job=${spec%@*}
  limit=${spec##*@}
  [ "$limit" = "$spec" ] && limit=$deadline
  left=$((deadline - ($(date +%s) - t0)))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 20 ]; then
    echo "$job: skipped, $limit s for it (the deadline leaves $left s)"
    continue
  fi
  name=$(echo "$job" | tr -c 'A-Za-z0-9_.\n-' '_')
  log="$logs/$name.log"
  start=$(date +%s)
  case "$job" in
    ops) timeout "$limit" "$ops" > "$log" 2>&1 ;;
    ops-memcheck) timeout "$limit" compute-sanitizer --tool memcheck --error-exitcode 99 "$ops" > "$log" 2>&1 ;;
    ops-racecheck|ops-racecheck=*)
      glob=${job#ops-racecheck}
      OPSLIB_TEST_FILTER="${glob#=}" timeout "$limit" compute-sanitizer --tool racecheck --error-exitcode 99 "$ops" \
        > "$log" 2>&1 ;;
    others)
      OUT="$logs/others" timeout "$limit" "$here/run_all.sh" --sanitizer --skip '^tests_gpu_gpu_ops_test$' \
        > "$log" 2>&1 ;;
    compare)
      # shellcheck disable=SC2086  # COMPARE_ARGS is a list of options
      (cd "$logs" && timeout "$limit" python3 "$here/compare.py" ${COMPARE_ARGS:---families sdpa}) > "$log" 2>&1 ;;
    host)
      { nvcc -O2 -std=c++17 -arch=sm_90a -I"$here/include" "$here/host_launch.cu" -L"$here/lib" -lopslib \
            -o "$logs/host_launch" && timeout "$limit" "$logs/host_launch" &&
          python3 "$here/python/opslib/_build.py" --quiet &&
          timeout "$limit" python3 "$here/host_cost.py" --json "$logs/host_cost.json"; } > "$log" 2>&1 ;;
    block)
      { python3 "$here/python/opslib/_build.py" --quiet &&
          timeout "$limit" python3 "$here/llama_block.py" --json "$logs/llama_block.json"; } > "$log" 2>&1 ;;
    *) echo "$job: unknown job (ops, ops-memcheck, ops-racecheck[=GLOB], others, compare, host, block)"; continue ;;
  esac
  code=$?
  [ "$code" = 124 ] && note=" (timed out)" || note=""
  lines=3
  [ "$job" = compare ] && lines=6
  echo "$job: exit $code$note, $(($(date +%s) - start)) s, $(summary "$log" $lines)"
done
echo "jobs: $(($(date +%s) - t0)) s"
