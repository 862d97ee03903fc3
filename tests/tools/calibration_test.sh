#!/bin/sh
# Each calibration table is what tools/calibrate.py fits to the committed sweeps (the command
# in its header, run again, reproduces it byte for byte), and bench/sweep.py's grid and
# summary run without a GPU. Prints "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
. tests/tools/check.sh
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
tally
