"""ops_test: a cmocka test in C against libopslib.a and the shared test helpers."""

load("//tools/bazel:copts.bzl", "OPS_C_COPTS")

def ops_test(name, srcs, deps = [], size = "small", copts = [], **kwargs):
    native.cc_test(
        name = name,
        srcs = srcs,
        copts = OPS_C_COPTS + copts,
        deps = deps + ["//tests/support:opst"],
        linkstatic = True,
        size = size,
        **kwargs
    )
