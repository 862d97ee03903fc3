#!/bin/sh
# The main demo: ops_sdpa from plain C (examples/sdpa_demo.c). Installs what is missing first.
set -eu
cd "$(dirname "$0")/.."
tools/setup.sh
exec bazel run --ui_event_filters=-info,-stdout --noshow_progress //examples:sdpa_demo
