#!/bin/sh
# make_tree.sh OUT_TAR PC_IN CONFIG_IN CONFIG_VERSION_IN VERSION_H LIB... HEADER...: the
# install tree as a tar: lib/libopslib.a, include/opslib/*.h, lib/pkgconfig/opslib.pc and
# lib/cmake/opslib/opslibConfig.cmake + opslibConfigVersion.cmake (versions from version.h).
set -eu
out="$1"; pc_in="$2"; config_in="$3"; config_version_in="$4"; version_h="$5"; shift 5
root=$(mktemp -d)
mkdir -p "$root/lib/pkgconfig" "$root/lib/cmake/opslib" "$root/include/opslib"
for f in "$@"; do
  case "$f" in
    *libopslib.a) cp "$f" "$root/lib/libopslib.a" ;;
    *.h) cp "$f" "$root/include/opslib/" ;;
  esac
done
v() { sed -n "s/^#define OPS_VERSION_$1 \([0-9]*\)$/\1/p" "$version_h"; }
version="$(v MAJOR).$(v MINOR).$(v PATCH)"
fill() { sed "s/@VERSION@/$version/g; s/@MAJOR@/$(v MAJOR)/g" "$1" > "$2"; }
fill "$pc_in" "$root/lib/pkgconfig/opslib.pc"
fill "$config_in" "$root/lib/cmake/opslib/opslibConfig.cmake"
fill "$config_version_in" "$root/lib/cmake/opslib/opslibConfigVersion.cmake"
chmod -R u+w "$root"
tar -C "$root" -cf "$out" lib include
rm -rf "$root"
