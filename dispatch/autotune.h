/*
 * Measured autotuning (ops_handle_set_autotune) and the tune cache file
 * (ops_handle_set_tune_cache): the dispatcher's side of runtime/tuner.h.
 *
 * A measured choice is kept per shape bucket: the problem with every dims[] extent rounded up
 * to the next 2^k or 3 * 2^(k-1), so that one measurement serves the shapes around it; it
 * applies to a call only where its kernel is eligible for the exact problem.
 */
#ifndef OPSLIB_DISPATCH_AUTOTUNE_H_
#define OPSLIB_DISPATCH_AUTOTUNE_H_

#include <stddef.h>

#include "capabilities/rows.h"
#include "dispatch/validate.h"
#include "runtime/tuner.h"

/* The tuner key of p: its shape bucket, zero-filled to OPSI_CACHE_KEY_WORDS words. */
void opsi_tune_key(const opsi_problem *p, uint64_t key[OPSI_CACHE_KEY_WORDS]);

/* The measured choice for p's bucket, if any: 1 and *out, else 0. */
int opsi_tune_lookup(ops_handle h, const opsi_problem *p, opsi_tune_entry *out);

/* Why the model decides a call that autotune would otherwise time, for explain: NULL when it
 * would be timed on its next run. */
const char *opsi_tune_blocker(const opsi_vctx *v, int eligible);

/* Times the first OPS_AUTOTUNE_TOP_K of `ranked[0..n)` (the eligible rows by estimate)
 * that fit the call's workspace on the call's arguments, when at least two do (*measured =
 * 1): records the fastest for p's bucket (and rewrites the attached tune cache file; a
 * failure to write is one line on stderr) and returns it in *best. Otherwise *best is
 * ranked[0] and nothing runs. */
ops_status opsi_tune_measure(const opsi_vctx *v, const opsi_problem *p, const opsi_kernel_row *const *ranked,
                             int n, const void *args, void *workspace, size_t workspace_bytes,
                             const opsi_kernel_row **best, int *measured);

/* The tune cache file: reads `path` into the handle's table (quiet: no warning line) and
 * writes the table to the attached path (merged with the file's current entries). */
void opsi_tune_file_load(ops_handle h, const char *path, int quiet);
ops_status opsi_tune_file_save(ops_handle h, const char *fn);

#endif /* OPSLIB_DISPATCH_AUTOTUNE_H_ */
