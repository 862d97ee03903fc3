#!/bin/sh
# The fuzz target in CI: replays the checked-in corpus (every reproducer of a past defect is
# in it), then fuzzes from it for OPS_FUZZ_SECONDS (default 60). A broken promise, a
# sanitizer report, a leak or a 10 s hang fails the test; libFuzzer prints the input in
# base64 and the reproducer file lands in the test's outputs (bazel-testlogs/.../outputs).
#   fuzz_smoke_test.sh OPS_FUZZ CORPUS_DIR
set -u
bin=$1
corpus=$2
secs=${OPS_FUZZ_SECONDS:-60}
tmp=${TEST_TMPDIR:-$(mktemp -d)}
out=${TEST_UNDECLARED_OUTPUTS_DIR:-$tmp}
opts="-timeout=10 -rss_limit_mb=2048 -max_len=4096 -artifact_prefix=$out/ -print_final_stats=1"

# shellcheck disable=SC2086
"$bin" $opts -runs=0 "$corpus" > "$tmp/replay.log" 2>&1
rc=$?
grep -v "^#[0-9]\|^INFO" "$tmp/replay.log" | tail -60
if [ "$rc" -ne 0 ]; then
  echo "fuzz_smoke_test: replaying the corpus failed (exit $rc, above)"
  echo "[  FAILED  ] 1 test(s), listed below:"
  exit 1
fi
echo "corpus replayed: $(ls "$corpus" | wc -l) inputs"
echo "[  PASSED  ] 1 test(s)."

mkdir -p "$tmp/new"
# shellcheck disable=SC2086
"$bin" $opts -max_total_time="$secs" "$tmp/new" "$corpus" > "$tmp/fuzz.log" 2>&1
rc=$?
grep -v "^#[0-9].*\(NEW\|REDUCE\|pulse\)" "$tmp/fuzz.log" | tail -60
if [ "$rc" -ne 0 ]; then
  echo "fuzz_smoke_test: ops_fuzz found a defect in ${secs} s (exit $rc); the input is above (Base64)"
  echo "and under $out; add it to tests/fuzz/corpus once fixed"
  echo "[  FAILED  ] 1 test(s), listed below:"
  exit 1
fi
echo "fuzzed ${secs} s: $(grep '^stat::number_of_executed_units' "$tmp/fuzz.log" | awk '{print $2}') executions, nothing found"
echo "[  PASSED  ] 1 test(s)."
