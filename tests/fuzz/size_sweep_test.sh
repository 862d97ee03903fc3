#!/bin/sh
# size_sweep under Bazel: 1.5 million calls (about 15 s here), counted as one test case by
# tools/count_tests.py. Leaks are not its subject: LeakSanitizer stays off.
set -eu
ASAN_OPTIONS=detect_leaks=0 "$1" 1500000
echo "[  PASSED  ] 1 test(s)."
