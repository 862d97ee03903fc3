#!/bin/sh
# Each calibration table is what tools/calibrate.py fits to the committed sweeps (the command
# in its header, run again, reproduces it byte for byte), and bench/sweep.py's grid and
# summary run without a GPU. Prints "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
pass=0
fail=0
check() { # name, then the command
  name=$1
  shift
  if "$@" >/tmp/calibration_test.$$ 2>&1; then
    pass=$((pass + 1))
    echo "ok   $name"
  else
    fail=$((fail + 1))
    echo "FAIL $name"
    cat /tmp/calibration_test.$$
  fi
}
refit() { # the table's own refit command, as a shell reads it (quoted plan words), its output against the table
  cmd=$(sed -n 's/^ \*   \(python3 tools\/calibrate.py .*\) --out .*/\1/p' "$1")
  [ -n "$cmd" ] && eval "$cmd" 2>/dev/null | cmp -s - "$1"
}
for table in capabilities/calibration_*.c; do
  check "the table's refit command reproduces $table" refit "$table"
done
grid() { n=$(python3 bench/sweep.py --list | tail -n 1 | cut -d' ' -f1) && [ "$n" -ge 150 ]; }
check "the sweep's grid has at least 150 shapes" grid
summary() { python3 bench/sweep.py --summary bench/results/sweep_h100_2026-11-24_calibrated.json | grep -q '^all '; }
check "the sweep's summary reads a committed sweep" summary
rm -f /tmp/calibration_test.$$
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
