#!/bin/sh
# bench/grid_cmp.py on a committed call (session 67's nar / sm2, whose numbers RESULTS.md
# quotes) and on runs written here with known answers: the geomean, a row, the exit status,
# GEMM labels, and the refusals (a build without runs, runs of different shapes, a directory
# holding both grids). Prints "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
tool=bench/grid_cmp.py
results=bench/results/attn_issue26_h200_2026-12-01_s67_halflast.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. tests/tools/check.sh
status() { # expected status, then the tool's arguments: its output in $tmp/got
  want=$1
  shift
  python3 "$tool" "$@" >"$tmp/got" 2>&1
  got=$?
  [ "$got" -eq "$want" ] || { echo "status $got, want $want"; cat "$tmp/got"; return 1; }
}
committed() {
  status 1 --results "$results" s67_nar_vs_sm2_01:04Z nar sm2 &&
    grep -q "GPU time nar / sm2: geomean 1.0131 over 21 shapes" "$tmp/got" &&
    grep -q "^short B64 S128 GQA 32:8 d128 causal .* nar/sm2 0.972$" "$tmp/got"
}
check "the committed call: geomean 1.0131, B64 S128 GQA causal 0.972, not faster" committed
check "the committed call under --below 1.02" status 0 --results "$results" s67_nar_vs_sm2_01:04Z nar sm2 --below 1.02
check "a call the file does not hold" status 2 --results "$results" s99 nar sm2
# two attention shapes; build a at half of b's time in both runs, PyTorch at b's time
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
def run(us, shapes=2):
    rows = [{"group": "short", "b": 4, "s": 256 * (i + 1), "hq": 8, "hkv": 2, "d": 128, "causal": i == 0,
             "us": us * (i + 1), "torch_us": 20.0 * (i + 1)} for i in range(shapes)]
    return {"rows": rows}
for name, r in [("attn_grid_a_1", run(10.0)), ("attn_grid_b_2", run(20.0)), ("attn_grid_a_3", run(10.0)),
                ("attn_grid_b_4", run(20.0)), ("attn_grid_c_5", run(10.0, 1))]:
    json.dump(r, open(f"{d}/{name}.json", "w"))
gemm = {"rows": [{"m": 16, "n": 4096, "k": 4096, "us": 12.0, "torch_us": 9.0}]}
json.dump(gemm, open(f"{d}/gemm_grid_a_6.json", "w"))
json.dump({"rows": [dict(gemm["rows"][0], us=6.0)]}, open(f"{d}/gemm_grid_b_7.json", "w"))
PY
halved() {
  status 0 "$tmp" a b --kind attn --markdown &&
    grep -q "GPU time a / b: geomean 0.5000 over 2 shapes" "$tmp/got" &&
    grep -q "^| short B4 S256 GQA 8:2 d128 causal | 20.0 | 10.0 | 0.500 | 20.0 | 1.00x | 2.00x |$" "$tmp/got" &&
    grep -q "PyTorch's time over ours, short (2 shapes): b 1.000x, a 2.000x" "$tmp/got"
}
check "runs written here: a at half of b's time" halved
check "the other way round: not faster" status 1 "$tmp" b a --kind attn
gemm() { status 1 "$tmp" a b --kind gemm && grep -q "^m16 n4096 k4096 .* a/b 2.000$" "$tmp/got"; }
check "GEMM runs: labels and ratio" gemm
check "a build without runs" status 2 "$tmp" a nope --kind attn
check "builds of different shapes" status 2 "$tmp" c b --kind attn
check "a directory of both grids without --kind" status 2 "$tmp" a b
tally
