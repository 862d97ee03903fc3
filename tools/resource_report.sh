#!/bin/sh
# Prints ptxas's register / shared-memory / spill report of every CUDA object in the
# build, per architecture (the "-Xptxas -v" report, kept beside each object).
#   tools/resource_report.sh [--//tools/bazel:cuda_archs=sm_90a]
set -eu
cd "$(dirname "$0")/.."
objects=$(bazel query --noshow_progress 'kind("cuda_object", //...)' 2>/dev/null)
groups=$(bazel query --noshow_progress 'attr(name, "_objs_resources$", //...)' 2>/dev/null)
bazel build --noshow_progress "$@" $groups >/dev/null 2>&1 || bazel build "$@" $groups
bin=$(bazel info "$@" bazel-bin 2>/dev/null)
for label in $objects; do
  f="$bin/$(echo "$label" | sed 's|^//||; s|:|/|').resources.txt"
  echo "== $label"
  grep -E "Compiling entry|registers|stack frame" "$f" | sed 's/^ptxas info    : /  /'
done
