#!/bin/sh
# Packs the libopslib.so of several builds (and one build's gpu_ops_test) into one solid xz
# archive, gpu_carry/ab.tar.xz, with the runner tools/ab_run.sh, the Python binding and the
# grid scripts: a same-call comparison of builds on a GPU host reached through a size-capped
# copy. Builds of one tree share most of their kernels' bytes, which a solid archive stores
# once (2026-11-30: main's library, a branch's, and the branch's test binary, 40 MB each
# stripped, in 48 MB).
#
#   tools/pack_ab.sh [--tests DIR] NAME=DIR [NAME=DIR]...
#     NAME=DIR     DIR's libopslib.so (DIR: a checkout whose bazel-bin has //:opslib_shared) as
#                  lib/NAME.so
#     --tests DIR  DIR's gpu_ops_test (//tests/gpu:gpu_ops_test, built) as bin/gpu_ops_test
#   on the GPU host:  tar xJf gpu_carry/ab.tar.xz && ab/ab_run.sh 'grid "new main new main"'
set -eu
cd "$(dirname "$0")/.."
tests=""
if [ "${1:-}" = "--tests" ]; then tests="$2"; shift 2; fi
[ $# -gt 0 ] || { echo "usage: tools/pack_ab.sh [--tests DIR] NAME=DIR..." >&2; exit 2; }
bin_of() { (cd "$1" && bazel info bazel-bin 2>/dev/null); }
out=$(mktemp -d)
mkdir -p "$out/ab/lib" "$out/ab/bin" "$out/ab/python/opslib" "$out/ab/bench" "$out/ab/tools"
for spec in "$@"; do
  name=${spec%%=*}
  dir=${spec#*=}
  cp "$(bin_of "$dir")/libopslib.so" "$out/ab/lib/$name.so"
  chmod u+w "$out/ab/lib/$name.so"
  strip --strip-unneeded "$out/ab/lib/$name.so"
done
if [ -n "$tests" ]; then
  t="$(bin_of "$tests")/tests/gpu/gpu_ops_test"
  cp "$t" "$out/ab/bin/gpu_ops_test"
  chmod u+w "$out/ab/bin/gpu_ops_test"
  strip --strip-unneeded "$out/ab/bin/gpu_ops_test"
  # cmocka: the one shared library outside glibc and libstdc++ it needs
  for lib in $(ldd "$t" | awk '/=> \// {print $3}'); do
    case "$(basename "$lib")" in libcmocka*) cp -L "$lib" "$out/ab/lib/" ;; esac
  done
fi
cp python/opslib/*.py "$out/ab/python/opslib/"
cp bench/attn_grid.py bench/gemm_grid.py bench/grid_cmp.py bench/sweep.py bench/sdpa_bwd_small.py bench/host_launch.cu \
  bench/code_refetch.py bench/code_refetch.cu \
  "$out/ab/bench/"
cp -r include "$out/ab/include"
cp tools/ab_run.sh "$out/ab/"
cp tools/sass_stats.py "$out/ab/tools/"
mkdir -p gpu_carry
tar cf - -C "$out" ab | xz -6e --lzma2=dict=128MiB > gpu_carry/ab.tar.xz
rm -rf "$out"
du -h gpu_carry/ab.tar.xz
