#!/bin/sh
# The Python binding's tests under Bazel: Debian's python3 (with python3-numpy and
# python3-pytest from tools/setup.sh) against the libopslib.so and the opslib._ext that
# Bazel just built.
# Without a GPU or PyTorch, test_torch.py reports itself skipped and says why.
set -eu
export OPSLIB_LIBRARY="$PWD/libopslib.so"
export OPSLIB_REQUIRE_EXT=1  # python:ext is built beside it: its absence is a failure here
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 -m pytest -p no:cacheprovider -rs -v python/tests "$@"
