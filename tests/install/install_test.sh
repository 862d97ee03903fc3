#!/bin/sh
# Unpacks //:install into a temporary prefix, builds examples/sdpa_demo.c with plain gcc
# and `pkg-config --cflags --libs opslib`, and runs it (CPU backend without a GPU).
set -eu
tar_file="$TEST_SRCDIR/opslib/opslib-install.tar"
demo_src="$TEST_SRCDIR/opslib/examples/sdpa_demo.c"
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
