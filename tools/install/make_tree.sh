#!/bin/sh
# make_tree.sh OUT_TAR PC_IN VERSION_H LIB... HEADER...: the install tree as a tar:
#   lib/libopslib.a, include/opslib/*.h, lib/pkgconfig/opslib.pc (version from version.h).
set -eu
out="$1"; pc_in="$2"; version_h="$3"; shift 3
root=$(mktemp -d)
mkdir -p "$root/lib/pkgconfig" "$root/include/opslib"
for f in "$@"; do
  case "$f" in
    *libopslib.a) cp "$f" "$root/lib/libopslib.a" ;;
    *.h) cp "$f" "$root/include/opslib/" ;;
  esac
done
v() { sed -n "s/^#define OPS_VERSION_$1 \([0-9]*\)$/\1/p" "$version_h"; }
sed "s/@VERSION@/$(v MAJOR).$(v MINOR).$(v PATCH)/" "$pc_in" > "$root/lib/pkgconfig/opslib.pc"
chmod -R u+w "$root"
tar -C "$root" -cf "$out" lib include
rm -rf "$root"
