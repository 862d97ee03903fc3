#!/bin/sh
# Installs what building and testing opslib needs, from Debian's packages, when missing:
# Bazel (bazel-bootstrap, which runs fully offline with third_party/'s stand-ins), cmocka
# (tests), DLPack headers, Google Benchmark, NumPy, pytest and the headers of Debian's
# python3 (the Python binding, its C path and tests), clang with libFuzzer (the fuzz target, tests/fuzz), cmake (the
# install test's CMake consumer). The CUDA toolkit must be at /usr/local/cuda. Then keeps
# the shared Bazel disk cache under its cap (tools/prune_disk_cache.sh).
set -eu

need=""
command -v bazel >/dev/null 2>&1 || need="$need bazel-bootstrap"
[ -f /usr/include/cmocka.h ] || need="$need libcmocka-dev"
[ -f /usr/include/dlpack/dlpack.h ] || need="$need libdlpack-dev"
[ -f /usr/include/benchmark/benchmark.h ] || need="$need libbenchmark-dev"
command -v g++ >/dev/null 2>&1 || need="$need g++"
# the install test's CMake consumer (tests/install)
command -v cmake >/dev/null 2>&1 || need="$need cmake"
# the fuzz target (tests/fuzz): clang with libFuzzer and the sanitizer runtimes
command -v clang >/dev/null 2>&1 || need="$need clang"
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 || need="$need libclang-rt-dev"
# the Python binding's tests run on Debian's python3 (python/run_pytest.sh)
/usr/bin/python3 -c "import numpy" >/dev/null 2>&1 || need="$need python3-numpy"
/usr/bin/python3 -c "import pytest" >/dev/null 2>&1 || need="$need python3-pytest"
# the binding's C path (python/opslib/_ext.c) is built against Debian's python3
/usr/bin/python3 -c 'import os, sysconfig; os.stat(sysconfig.get_paths()["include"] + "/Python.h")' \
  >/dev/null 2>&1 || need="$need python3-dev"

if [ -n "$need" ]; then
  echo "setup: installing$need"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $need >/dev/null
fi

if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: opslib needs the CUDA toolkit at /usr/local/cuda (nvcc not found there)" >&2
  exit 1
fi

"$(dirname "$0")/prune_disk_cache.sh"
