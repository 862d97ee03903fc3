#!/bin/sh
# size_sweep under Bazel: 1.5 million calls (about 15 s here); leaks are not its subject
# (the sanitizers' report of a leak would hide nothing this test looks for).
set -eu
ASAN_OPTIONS=detect_leaks=0 exec "$1" 1500000
