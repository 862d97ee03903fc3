#!/usr/bin/env python3
"""Summarizes a GPU bundle run: test cases (cmocka counts in each plain log), runs under
compute-sanitizer, benchmarks. Last line: "bundle: N passed, N failed, N skipped"."""
import os
import re
import sys

logs, results = sys.argv[1], sys.argv[2]
passed = failed = skipped = 0
runs_failed = []
for line in open(results):
    name, kind, code = line.split()
    if code != "0":
        runs_failed.append(f"{name} [{kind}] exit {code}")
    if kind != "plain":
        continue
    text = open(os.path.join(logs, name + ".log"), errors="replace").read()
    p = sum(int(n) for n in re.findall(r"^\[  PASSED  \] (\d+) test\(s\)\.", text, re.M))
    f = sum(int(n) for n in re.findall(r"^\[  FAILED  \] (\d+) test\(s\), listed below", text, re.M))
    s = sum(int(n) for n in re.findall(r"^\[  SKIPPED \] (\d+) test\(s\), listed below", text, re.M))
    m = re.findall(r"^=* ?(\d+ (?:passed|failed|skipped|errors?)\b.*) in [\d.]+s", text, re.M)
    if name == "python_test" and m:  # pytest's summary line
        counts = dict((k, int(n)) for n, k in re.findall(r"(\d+) (passed|failed|skipped|error)", m[-1]))
        p, f, s = counts.get("passed", 0), counts.get("failed", 0) + counts.get("error", 0), counts.get("skipped", 0)
    if name == "examples_sdpa_demo":
        p, f = (1, 0) if code == "0" else (0, 1)
    elif code != "0" and f == 0:
        f = 1
    passed, failed, skipped = passed + p, failed + f, skipped + s
sanitized = sum(1 for line in open(results) if line.split()[1] in ("memcheck", "racecheck"))
# Runs whose program made CUDA calls: compute-sanitizer then prints its error summary.
with_cuda = 0
for line in open(results):
    name, kind, _ = line.split()
    if kind in ("memcheck", "racecheck"):
        text = open(os.path.join(logs, f"{name}.{kind}.log"), errors="replace").read()
        with_cuda += bool(re.search(r"(ERROR|RACECHECK) SUMMARY", text))
for r in runs_failed:
    print("failed run:", r)
if sanitized:
    bad = sum(1 for r in runs_failed if "[memcheck]" in r or "[racecheck]" in r)
    print(f"compute-sanitizer: {sanitized} runs (memcheck + racecheck; {with_cuda} of them made CUDA calls), "
          f"{sanitized - bad} clean, {bad} with errors")
print(f"bundle: {passed} passed, {failed + sum(1 for r in runs_failed if '[plain]' not in r)} failed, {skipped} skipped")
