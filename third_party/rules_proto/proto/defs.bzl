"""Offline stand-in for @rules_proto: forwards to Bazel 4.2's native proto rule."""

def proto_library(**kwargs):
    native.proto_library(**kwargs)
