#!/bin/sh
# nvcc_compile.sh NVCC REPORT ARGS...: run nvcc; keep ptxas's resource lines (registers,
# shared memory, spills) in REPORT and pass every other line (warnings, errors) through.
nvcc="$1"; report="$2"; shift 2
log="$report.log"
"$nvcc" "$@" >"$log" 2>&1
status=$?
grep -E '^(ptxas info|    [0-9]+ bytes stack)' "$log" >"$report"
grep -vE '^(ptxas info|    [0-9]+ bytes stack)' "$log" >&2
rm -f "$log"
exit $status
