#!/bin/sh
# Fuzzes the public ABI for SECONDS (default 3600) with tests/fuzz's target: builds it with
# Bazel (clang, ASan + UBSan), then runs libFuzzer from the checked-in corpus, keeping what it
# learns in fuzz-out/corpus and any reproducer in fuzz-out/ (crash-*, leak-*, timeout-*).
# A reproducer replays with: bazel-bin/tests/fuzz/ops_fuzz fuzz-out/crash-...
# (OPS_FUZZ_VERBOSE=1 prints each call's operands). Once its defect is fixed, copy it into
# tests/fuzz/corpus/ so that every test run replays it.
#   tools/fuzz.sh [SECONDS] [extra libFuzzer flags...]
set -eu
cd "$(dirname "$0")/.."
secs=${1:-3600}
[ $# -gt 0 ] && shift
tools/setup.sh
bazel build //tests/fuzz:ops_fuzz_bin
mkdir -p fuzz-out/corpus
cp bazel-bin/tests/fuzz/ops_fuzz fuzz-out/ops_fuzz
exec fuzz-out/ops_fuzz -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 -max_len=4096 \
  -artifact_prefix=fuzz-out/ -print_final_stats=1 "$@" fuzz-out/corpus tests/fuzz/corpus
