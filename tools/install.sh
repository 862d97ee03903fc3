#!/bin/sh
# Installs libopslib.a, include/opslib/ and lib/pkgconfig/opslib.pc under PREFIX
# (default /usr/local), for users who do not build with Bazel:
#   tools/install.sh $HOME/.local
#   PKG_CONFIG_PATH=$HOME/.local/lib/pkgconfig cc app.c $(pkg-config --cflags --libs opslib)
set -eu
cd "$(dirname "$0")/.."
prefix="${1:-/usr/local}"
tools/setup.sh
bazel build --noshow_progress //:install
mkdir -p "$prefix"
tar -C "$prefix" -xf "$(bazel info bazel-bin 2>/dev/null)/opslib-install.tar"
echo "installed opslib under $prefix (pkg-config file: $prefix/lib/pkgconfig/opslib.pc)"
