/*
 * Feature coverage: a kernel's capability row claims features (causal, varlen, bias...);
 * the kernel's own tests must exercise every one. opst_coverage_start installs a profiler
 * on the handle that records, per kernel, the features of each call it ran (read from the
 * problem text); opst_coverage_check then fails the test for every kernel whose row names
 * `test_target` in its tests and never ran, or claims a feature no call used.
 */
#ifndef OPSLIB_TESTS_SUPPORT_COVERAGE_H_
#define OPSLIB_TESTS_SUPPORT_COVERAGE_H_

#include <stddef.h>

#include "opslib/opslib.h"

void opst_coverage_start(ops_handle h);
void opst_coverage_check(const char *test_target);

/* Records that `kernel` served (or, in a dry run, would serve) a call whose problem text
 * (ops_explain's `problem`, the profiler's `problem`) lists its features in brackets. */
void opst_coverage_note(const char *kernel, const char *problem);

/* The newest launch the profiler of opst_coverage_start delivered: its kernel and launch
 * plan ("" where it has one way to run) into the buffers (NULL with size 0: not wanted);
 * returns the launches delivered so far (flush the handle's profiler first). */
int opst_coverage_last_launch(char *kernel, size_t kernel_size, char *plan, size_t plan_size);

#endif /* OPSLIB_TESTS_SUPPORT_COVERAGE_H_ */
