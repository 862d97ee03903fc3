#!/bin/sh
# run_all.sh: the GPU bundle's runner (packed by tools/pack_gpu_bundle.sh).
#   --sanitizer     also run every test under compute-sanitizer (memcheck and racecheck)
#   --bench         also run the benchmarks (bin/bench_*), JSON into $LOGS
#   --filter REGEX  only the binaries whose name matches
#   --skip REGEX    not the binaries whose name matches (python_test, compare: names too)
# Also runs the Python binding's tests (python_test) where the host has torch and pytest;
# --bench also runs bench/compare.py (opslib vs PyTorch; COMPARE_ARGS passes options;
# BENCH_ARGS passes options to every bench_* binary, e.g. --benchmark_min_time=0.2s).
# Logs go to $OUT (the device tool's output folder) when set, else ./logs. The last line
# is the summary: "bundle: N passed, N failed, N skipped".
set -u
here=$(cd "$(dirname "$0")" && pwd)
# cuBLAS for bench_gemm_bench comes from the host's CUDA toolkit (not carried: too large)
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
sanitizer=0; bench=0; filter="."; skip=""; COMPARE_ARGS="${COMPARE_ARGS:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitizer) sanitizer=1 ;;
    --bench) bench=1 ;;
    --filter) filter="$2"; shift ;;
    --skip) skip="$2"; shift ;;
    *) echo "run_all.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
# what --filter and --skip leave in
wanted() { echo "$1" | grep -Eq "$filter" && ! { [ -n "$skip" ] && echo "$1" | grep -Eq "$skip"; }; }
logs="${OUT:-$here/logs}"
mkdir -p "$logs"
echo "bundle: $(cat "$here/BUILD_INFO")"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null || true

results="$logs/results.txt"
: > "$results"
# The first error or hazard a sanitizer reported, with its kernel and source lines, on the
# console: the logs themselves may not come back from a size-capped host.
first_report() {
  grep -m 1 -A 14 -E "^========= (Error|Warning|Race|Invalid|Program hit)" "$1" | sed "s|^|  $2 first report: |"
}

for t in "$here"/bin/*_test "$here"/bin/examples_sdpa_demo "$here"/bin/examples_decode_loop; do
  name=$(basename "$t")
  wanted "$name" || continue
  "$t" > "$logs/$name.log" 2>&1
  echo "$name plain $?" >> "$results"
  tail -n 3 "$logs/$name.log" | sed "s|^|  $name: |"
  if [ $sanitizer -eq 1 ] && [ "$name" != "examples_sdpa_demo" ]; then
    for tool in memcheck racecheck; do
      # CPU-only tests never initialize CUDA; that is not an error for them.
      compute-sanitizer --tool $tool --require-cuda-init=no --error-exitcode 99 "$t" > "$logs/$name.$tool.log" 2>&1
      echo "$name $tool $?" >> "$results"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$logs/$name.$tool.log" | tail -n 1 | sed "s|^|  $name [$tool]: |"
      first_report "$logs/$name.$tool.log" "$name [$tool]"
    done
  fi
done
# The Python binding against PyTorch (python/tests), where the host has torch and pytest.
if wanted python_test; then
  if python3 -c "import torch, pytest, numpy" 2>/dev/null; then
    # the C path for this host's Python (its absence then fails test_native.py)
    python3 "$here/python/opslib/_build.py" --quiet > "$logs/python_ext_build.log" 2>&1
    echo "python_ext build $?" >> "$results"
    tail -n 3 "$logs/python_ext_build.log" | sed "s|^|  python_ext: |"
    export OPSLIB_REQUIRE_EXT=1
    OPSLIB_LIBRARY="$here/lib/libopslib.so" python3 -m pytest -p no:cacheprovider -rs -q \
      "$here/python/tests" > "$logs/python_test.log" 2>&1
    echo "python_test plain $?" >> "$results"
    tail -n 4 "$logs/python_test.log" | sed "s|^|  python_test: |"
    # the C path again with tensors read through DLPack capsules (torch without the exchange table)
    OPSLIB_NO_EXCHANGE_API=1 OPSLIB_LIBRARY="$here/lib/libopslib.so" python3 -m pytest -p no:cacheprovider -q \
      "$here/python/tests/test_native_torch.py" > "$logs/python_test.capsules.log" 2>&1
    echo "python_test capsules $?" >> "$results"
    tail -n 1 "$logs/python_test.capsules.log" | sed "s|^|  python_test [capsules]: |"
    if [ $sanitizer -eq 1 ]; then
      for tool in memcheck racecheck; do
        # OPSLIB_SANITIZER: test_torch_ops.py leaves torch.compile out (inductor, instrumented, takes minutes)
        OPSLIB_SANITIZER=$tool OPSLIB_LIBRARY="$here/lib/libopslib.so" compute-sanitizer --tool $tool --error-exitcode 99 \
          python3 -m pytest -p no:cacheprovider -q "$here/python/tests" > "$logs/python_test.$tool.log" 2>&1
        echo "python_test $tool $?" >> "$results"
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$logs/python_test.$tool.log" | tail -n 1 | sed "s|^|  python_test [$tool]: |"
        first_report "$logs/python_test.$tool.log" "python_test [$tool]"
      done
    fi
  else
    echo "python_test: skipped, this host lacks torch, pytest or numpy"
  fi
fi
if [ $bench -eq 1 ]; then
  for b in "$here"/bin/bench_*; do
    [ -e "$b" ] || continue
    name=$(basename "$b")
    wanted "$name" || continue
    "$b" --benchmark_out="$logs/$name.json" --benchmark_out_format=json ${BENCH_ARGS:-} > "$logs/$name.log" 2>&1
    echo "$name bench $?" >> "$results"
    tail -n 40 "$logs/$name.log"
  done
fi
if [ $bench -eq 1 ]; then
  for py in "$here"/compare.py; do
    [ -e "$py" ] || continue
    name=$(basename "$py" .py)
    wanted "$name" || continue
    if python3 -c "import torch" 2>/dev/null; then
      (cd "$logs" && OPSLIB_LIBRARY="$here/lib/libopslib.so" python3 "$py" $COMPARE_ARGS) > "$logs/$name.log" 2>&1
      echo "$name bench $?" >> "$results"
      cat "$logs/$name.log"
    else
      echo "$name: skipped, no PyTorch on this host"
    fi
  done
fi
python3 "$here/count_bundle.py" "$logs" "$results"
