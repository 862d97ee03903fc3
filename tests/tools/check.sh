# The shell tests' tally, sourced: `check NAME COMMAND [ARGS..]` runs the command, counts it
# as passed or failed and prints its output when it fails; `tally` prints "N passed, N
# failed" and returns 1 where one failed.
pass=0
fail=0
check_out=$(mktemp)
check() {
  name=$1
  shift
  if "$@" >"$check_out" 2>&1; then
    pass=$((pass + 1))
    echo "ok   $name"
  else
    fail=$((fail + 1))
    echo "FAIL $name"
    cat "$check_out"
  fi
}
tally() {
  rm -f "$check_out"
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
