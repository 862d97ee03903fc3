#!/usr/bin/env python3
"""Counts test cases after `bazel test`: reads Bazel's summary (one line per target) and
each target's test.log (cmocka's "[  PASSED  ] N test(s)." lines, or pytest's summary).
A target that failed without reporting its cases counts as one failed case.
Prints the skipped cases with their reasons, then the line "N passed, N failed"."""
import os
import re
import sys

summary_path, testlogs = sys.argv[1], sys.argv[2]
target_re = re.compile(r"^(//\S+)\s+(PASSED|FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)\b")
passed = failed = skipped = 0
skip_notes = []
bad_targets = []
with open(summary_path, errors="replace") as f:
    targets = [m.groups() for m in map(target_re.match, f) if m]

for label, status in targets:
    pkg, name = label[2:].split(":")
    log = os.path.join(testlogs, pkg, name, "test.log")
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    p = sum(int(n) for n in re.findall(r"^\[  PASSED  \] (\d+) test\(s\)\.", text, re.M))
    fl = sum(int(n) for n in re.findall(r"^\[  FAILED  \] (\d+) test\(s\), listed below", text, re.M))
    sk = sum(int(n) for n in re.findall(r"^\[  SKIPPED \] (\d+) test\(s\), listed below", text, re.M))
    m = re.search(r"=+ (?:(\d+) failed)?[, ]*(?:(\d+) passed)?[, ]*(?:(\d+) skipped)?.* in [\d.]+s", text)
    if m and "pytest" in text:
        fl += int(m.group(1) or 0)
        p += int(m.group(2) or 0)
        sk += int(m.group(3) or 0)
    if status != "PASSED" and fl == 0:
        fl = 1
    if status != "PASSED":
        bad_targets.append(f"{label} {status}")
    passed += p
    failed += fl
    skipped += sk
    skip_notes += re.findall(r"^\[ SKIP     \] (.*)$", text, re.M)
    skip_notes += re.findall(r"^SKIPPED \[\d+\] (.*)$", text, re.M)  # pytest -rs

print()
print(f"test targets: {len(targets)} ({len(targets) - len(bad_targets)} passed)")
for t in bad_targets:
    print(f"  failed target: {t}")
for note in sorted(set(skip_notes)):
    print(f"skipped: {note}")
print(f"{skipped} skipped")
print(f"{passed} passed, {failed} failed")
