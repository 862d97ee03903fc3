"""Builds opslib._ext, the binding's per-call path in C, for the Python that runs this:

    python3 python/opslib/_build.py [--out PATH] [--include DIR] [--cc CC]
    python3 -m opslib._build ...     (the same, where the opslib package already imports)

It needs a C compiler, Python's headers (Debian: python3-dev) and opslib's headers (found
with --include, $OPSLIB_INCLUDE, the repository's include/ beside python/, or include/ in
this package); nothing else, no torch. Without it opslib works through ctypes alone, slower
per call (opslib.extension() says which path is in use, and why)."""
import argparse
import os
import shlex
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))


def _opslib_include(given):
    for d in (given, os.environ.get("OPSLIB_INCLUDE"), os.path.join(HERE, "..", "..", "include"),
              os.path.join(HERE, "include")):
        if d and os.path.exists(os.path.join(d, "opslib", "opslib.h")):
            return os.path.abspath(d)
    raise SystemExit("opslib._build: opslib/opslib.h not found; pass --include DIR (the directory "
                     "that holds opslib/)")


def command(out, include, cc=None, src=None):
    """The compiler's argument list."""
    cc = shlex.split(cc or os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    py_include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(py_include, "Python.h")):
        raise SystemExit(f"opslib._build: Python.h not in {py_include} (Debian: apt-get install python3-dev)")
    return cc + ["-shared", "-fPIC", "-O2", "-std=gnu11", "-fvisibility=hidden", "-Wall", "-Wextra",
                 "-Werror"] + shlex.split(os.environ.get("CFLAGS", "")) + ["-I" + py_include, "-I" + include, src or os.path.join(HERE, "_ext.c"),
                 "-o", out]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="the module's path (default: _ext<EXT_SUFFIX> in this package)")
    ap.add_argument("--include", help="the directory holding opslib/opslib.h")
    ap.add_argument("--src", help="_ext.c (default: the one in this package)")
    ap.add_argument("--cc", help="the C compiler (default: $CC, then Python's own)")
    ap.add_argument("--quiet", action="store_true", help="print nothing unless it fails")
    args = ap.parse_args(argv)
    out = args.out or os.path.join(HERE, "_ext" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = command(out, _opslib_include(args.include), args.cc, args.src)
    if not args.quiet:
        print(" ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    if not args.quiet:
        print(out)


if __name__ == "__main__":
    main()
