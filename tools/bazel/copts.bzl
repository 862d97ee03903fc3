"""Compiler flags shared by every opslib C target."""

# The library and its tests are C11 and must stay warning-free.
OPS_C_COPTS = [
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-pedantic",
    "-Werror",
    "-Wno-unused-function",
    "-fvisibility=hidden",
]
