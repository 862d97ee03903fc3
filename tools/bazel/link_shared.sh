#!/bin/sh
# link_shared.sh CC OUT VERSION_SCRIPT ARCHIVE...: libopslib.so from the very objects of
# libopslib.a (its position-independent twin, libopslib.pic.a), whole, plus the static
# CUDA runtime; -z defs makes a missing symbol a link error rather than a load error.
set -eu
cc="$1"; out="$2"; lds="$3"; shift 3
pic=""; cudart=""
for f in "$@"; do
  case "$f" in
    *libopslib.pic.a) pic="$f" ;;
    *libcudart_static.a) cudart="$f" ;;
  esac
done
[ -n "$pic" ] || { echo "link_shared.sh: no libopslib.pic.a among: $*" >&2; exit 1; }
[ -n "$cudart" ] || { echo "link_shared.sh: no libcudart_static.a among: $*" >&2; exit 1; }
"$cc" -shared -o "$out" -Wl,-soname,libopslib.so \
  -Wl,--whole-archive "$pic" -Wl,--no-whole-archive "$cudart" \
  -lstdc++ -lm -ldl -lpthread -lrt \
  -Wl,--version-script="$lds" -Wl,-z,defs
