#!/bin/sh
# The kernel sources against their lists: tools/gen_kernel_sources.py --check names every
# file that is missing, stale, or in no list, and exits 1 if there is one.
set -u
cd "$(dirname "$0")/../.."
if python3 tools/gen_kernel_sources.py --check --root .; then
  echo "1 passed, 0 failed"
else
  echo "0 passed, 1 failed"
  exit 1
fi
