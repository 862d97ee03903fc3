#!/bin/sh
# The install tree without Bazel, as a user vendoring opslib meets it:
#   1. plain gcc + `pkg-config --cflags --libs opslib` build examples/sdpa_demo.c; it runs
#      (CPU backend without a GPU);
#   2. CMake: find_package(opslib CONFIG REQUIRED) + opslib::opslib build a consumer that
#      defines functions with common names (launch, run, step, geom_of, cuda_status); it runs;
#   3. libopslib.a defines no global name outside the library's own: ops_* (the ABI), opsi_*
#      and C++ names in namespace opsi or in anonymous namespaces (internal), NVTX v3's weak
#      header-only definitions (nvtx*_v3, shared by design with any program that uses NVTX),
#      and the C++ runtime's weak personality reference.
set -eu
tar_file="$TEST_SRCDIR/opslib/opslib-install.tar"
demo_src="$TEST_SRCDIR/opslib/examples/sdpa_demo.c"
consumer_dir="$TEST_SRCDIR/opslib/tests/install/cmake_consumer"
prefix="$TEST_TMPDIR/prefix"
mkdir -p "$prefix"
tar -C "$prefix" -xf "$tar_file"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
echo "pkg-config: $(pkg-config --modversion opslib): $(pkg-config --cflags --libs opslib)"
# The demo also reads cuda_runtime_api.h (it uses the GPU when there is one).
gcc -std=c11 -Wall -Wextra -pedantic -Werror -I/usr/local/cuda/include "$demo_src" -o "$TEST_TMPDIR/demo" \
  $(pkg-config --cflags --libs opslib)
"$TEST_TMPDIR/demo"
echo "[  PASSED  ] 1 test(s)."

# CMake sees only the prefix: the consumer's sources are copied out of the runfiles tree
cp -r "$consumer_dir" "$TEST_TMPDIR/consumer_src"
if ! cmake -S "$TEST_TMPDIR/consumer_src" -B "$TEST_TMPDIR/consumer_build" -DCMAKE_PREFIX_PATH="$prefix" \
     > "$TEST_TMPDIR/cmake.log" 2>&1 ||
   ! cmake --build "$TEST_TMPDIR/consumer_build" >> "$TEST_TMPDIR/cmake.log" 2>&1; then
  cat "$TEST_TMPDIR/cmake.log"
  echo "install_test: the CMake consumer did not build"
  echo "[  FAILED  ] 1 test(s), listed below:"
  exit 1
fi
grep -E "opslib|Build files" "$TEST_TMPDIR/cmake.log" | head -3 || true
"$TEST_TMPDIR/consumer_build/consumer"
echo "[  PASSED  ] 1 test(s)."

foreign=$(nm -g --defined-only "$prefix/lib/libopslib.a" 2>/dev/null | awk 'NF == 3 { print $2, $3 }' |
  grep -Ev ' (ops_|opsi_|_ZN4opsi|_ZZN4opsi|_ZGVZN4opsi|_ZN[0-9]+_GLOBAL__N_|_ZZN[0-9]+_GLOBAL__N_|DW\.ref\.__gxx_personality_v0$)' |
  grep -Ev '^[WV] (nvtx[A-Za-z0-9_]*_v3|InitializeInjectionNvtx2_fnptr)$' || true)
if [ -n "$foreign" ]; then
  echo "install_test: libopslib.a defines names outside its own:"
  echo "$foreign" | head -40
  echo "[  FAILED  ] 1 test(s), listed below:"
  exit 1
fi
echo "libopslib.a: $(nm -g --defined-only "$prefix/lib/libopslib.a" 2>/dev/null | awk 'NF == 3' | wc -l) global definitions, all ops_*, opsi_*, namespace opsi or anonymous, or NVTX's weak ones"
echo "[  PASSED  ] 1 test(s)."
