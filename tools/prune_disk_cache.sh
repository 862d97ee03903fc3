#!/bin/sh
# Keeps Bazel's shared disk cache (.bazelrc: --disk_cache=~/.cache/opslib-bazel) under a
# size cap: Bazel 4.2.3 never deletes from it, and every kernel change adds the objects of
# a full rebuild. The oldest files (by modification time) go first; an object deleted here
# is only compiled again. Then warns when the disk holding the build is nearly full: an
# archive step that runs out of space fails with nothing but "ar failed: Exit 1".
#   OPSLIB_DISK_CACHE_MAX_GB  cap in GiB (default 24)
set -eu

cache="${HOME}/.cache/opslib-bazel"
cap_gb="${OPSLIB_DISK_CACHE_MAX_GB:-24}"

if [ -d "$cache" ]; then
  cap=$((cap_gb * 1024 * 1024 * 1024))
  # newest first; keep files while the running total stays under the cap
  find "$cache" -type f -printf '%T@ %s %p\n' | sort -rn |
    awk -v cap="$cap" '{ total += $2; if (total > cap) { sub(/^[^ ]+ [^ ]+ /, ""); print } }' |
    xargs -r -d '\n' rm -f --
fi

avail_kb=$(df -Pk "${HOME}" | awk 'NR == 2 { print $4 }')
if [ "${avail_kb:-0}" -lt $((4 * 1024 * 1024)) ]; then
  echo "setup: only $((avail_kb / 1024)) MiB free on the disk holding ${HOME};" \
    "a full build needs about 4 GiB (archives, test binaries, the disk cache)" >&2
fi
