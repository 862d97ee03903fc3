#!/bin/sh
# Builds the fuzz target: the harness and every C source of the library compiled by clang
# with libFuzzer's coverage, AddressSanitizer and UBSan (any UB report aborts), linked with
# the library's nvcc-compiled objects (not instrumented) and the static CUDA runtime.
#   build.sh OUT CUDART_STATIC_A [--plain] [--objs OBJ...] --srcs SRC...
# --plain: a program with its own main (size_sweep.c): the sanitizers without libFuzzer.
# Run from the repository root (or Bazel's execroot). CC overrides the compiler (clang).
set -eu
out=$1
cudart=$2
shift 2
objs=""
srcs=""
mode=""
plain=0
for a in "$@"; do
  case "$a" in
    --plain) plain=1 ;;
    --objs) mode=objs ;;
    --srcs) mode=srcs ;;
    *.c) [ "$mode" = srcs ] && srcs="$srcs $a" ;;
    *.o) [ "$mode" = objs ] && objs="$objs $a" ;;
    *) ;;
  esac
done
cc=${CC_FUZZ:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "build.sh: $cc not found (tools/setup.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
flags="-std=c11 -g -O1 -Wall -Wno-unused-function -I. -Iinclude -I/usr/local/cuda/include -DOPS_FUZZ_BUILD"
# compile in parallel, two at a time per core
n=0
for s in $srcs; do
  o="$tmp/$(echo "$s" | tr '/' '_').o"
  case "$plain:$s" in
    1:*) cov="" ;;
    0:tests/fuzz/*) cov="-fsanitize=fuzzer" ;;
    *) cov="-fsanitize=fuzzer-no-link" ;;
  esac
  # shellcheck disable=SC2086
  "$cc" $flags $san $cov -c "$s" -o "$o" &
  n=$((n + 1))
  if [ $((n % 4)) -eq 0 ]; then wait; fi
done
wait
for s in $srcs; do
  [ -f "$tmp/$(echo "$s" | tr '/' '_').o" ] || { echo "build.sh: $s did not compile" >&2; exit 1; }
done
# shellcheck disable=SC2086
link=-fsanitize=fuzzer
[ $plain -eq 1 ] && link=""
# shellcheck disable=SC2086
"$cc" $san $link -o "$out" "$tmp"/*.o $objs "$cudart" -lstdc++ -lm -ldl -lpthread -lrt
