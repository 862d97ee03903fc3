#!/bin/sh
# Every test: builds and runs //... with Bazel (fresh random inputs each run; GPU tests
# skip where there is no CUDA device), then counts the test cases of every target and
# ends with the line "N passed, N failed". Exit status: Bazel's.
set -u
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1

log=$(mktemp)
rc=$(mktemp)
# Bazel's own exit status, not tee's (plain sh has no pipefail): a failed build is red
{ bazel test --test_summary=short //... 2>&1; echo $? > "$rc"; } | tee "$log"
status=$(cat "$rc")
testlogs=$(bazel info bazel-testlogs 2>/dev/null)
python3 tools/count_tests.py "$log" "$testlogs"
rm -f "$log" "$rc"
exit "$status"
