#!/bin/sh
# nvcc_compile.sh NVCC REPORT ARGS...: run nvcc; keep ptxas's resource lines (registers,
# shared memory, spills) in REPORT and pass every other line (warnings, errors) through.
nvcc="$1"; report="$2"; shift 2
log="$report.log"
# nvcc names its temporary files after its process id, and every sandboxed action runs in
# its own pid namespace (often as the same pid) with the host's /tmp: parallel actions
# overwrote each other's files ("ptxas fatal: Input file ... could not be opened"). A
# private directory per action.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/opslib-nvcc.XXXXXX")
TMPDIR="$tmp" "$nvcc" "$@" >"$log" 2>&1
status=$?
rm -rf "$tmp"
grep -E '^(ptxas info|    [0-9]+ bytes stack)' "$log" >"$report"
grep -vE '^(ptxas info|    [0-9]+ bytes stack)' "$log" >&2
# ptxas reports a wgmma pipeline it had to serialize, or a wait it injected, as an info line
# (C7510-C7517, "Potential Performance Loss"): the kernel is correct and several times slower.
# An error here, as -Werror makes of warnings.
if [ $status -eq 0 ] && grep -E '\(C75[0-9][0-9]\)|Potential Performance Loss' "$log" >&2; then
  echo "nvcc_compile.sh: ptxas serialized wgmma or injected a wait (the lines above): an error" >&2
  status=1
fi
rm -f "$log"
exit $status
