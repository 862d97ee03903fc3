/*
 * Error injection: every op is called once validly (it must succeed and write its outputs),
 * then once per fault on a fresh valid call. Each fault must give its status, a message
 * that names the argument and says what was expected and what was given, and leave every
 * buffer of the call (inputs and outputs, including the padding of strided views) exactly
 * as it was.
 *
 * A fixture describes one op's valid call: its operands (each a poisoned opst_tensor whose
 * descriptor the faults edit), its params, its workspace, and how to call it. The generic
 * faults (errs_run_descriptor_faults) are applied to every operand; each op adds its own
 * (shapes, aliasing, params, workspace) through errs_check().
 */
#ifndef OPSLIB_TESTS_ERRORS_HARNESS_H_
#define OPSLIB_TESTS_ERRORS_HARNESS_H_

#include <stddef.h>
#include <stdint.h>

#include "opslib/opslib.h"
#include "tests/support/opst.h"

#define ERRS_MAX_ARGS 12

typedef struct errs_fixture errs_fixture;

enum { ERRS_INPUT = 0, ERRS_OUTPUT = 1, ERRS_OPTIONAL = 2 };

typedef struct errs_arg {
  const char *name; /* as messages spell it: "q", "params->bias" */
  opst_tensor t;
  int is_output;
  int optional; /* NULL means absent (or the operand sits in params, out of the generic
                   NULL-descriptor fault's reach): no NULL-descriptor fault */
} errs_arg;

struct errs_fixture {
  ops_handle h;
  errs_arg args[ERRS_MAX_ARGS];
  int nargs;
  void *workspace; /* what the call passes (faults may move it) */
  size_t workspace_bytes;
  void *workspace_alloc; /* what errs_free releases */
  union {
    ops_sdpa_params sdpa;
    ops_gemm_params gemm;
    ops_norm_params norm;
    ops_softmax_params softmax;
    ops_sin_affine_params sin_affine;
    ops_unary_params unary;
    ops_binary_params binary;
    ops_reduce_params reduce;
    ops_norm_backward_params norm_bwd;
    ops_dropout_params dropout;
    ops_rope_params rope;
    struct {
      ops_kv_cache_append_params p; /* first: the call faults edit its struct_size */
      ops_rope_params rope;
    } append;
  } p;
  int op;   /* the fixture's own selector (which op of a family) */
  ops_status (*call)(errs_fixture *f);
};

/* Adds an operand (flags: ERRS_INPUT or ERRS_OUTPUT, | ERRS_OPTIONAL); returns its
 * descriptor for params to point at. Inputs get random values; outputs stay poisoned. */
ops_tensor *errs_add(errs_fixture *f, opst_rng *r, const char *name, int flags, int32_t dtype,
                     int ndim, const int64_t *shape);

/* The descriptor the call passes for operand `name`: NULL when the fixture has no such
 * operand (an absent optional one) or when the NULL-descriptor fault targets it. */
const ops_tensor *errs_ptr(errs_fixture *f, const char *name);

/* The operand named `name` (fails the test if absent). */
errs_arg *errs_find(errs_fixture *f, const char *name);

/* Makes operand `a` a dense view (row-major strides) whose first element is the lowest-addressed
 * element of operand `b`'s view (fails the test unless a's bytes fit in b's span): the two then
 * share an element, and no other operand's memory, whatever layouts the random allocation gave
 * them (negative strides included). */
void errs_dense_over(errs_fixture *f, const char *a, const char *b);

void errs_free(errs_fixture *f);

/* A fixture builder: fills a valid call. `variant` lets one builder make several ops. */
typedef void (*errs_build_fn)(errs_fixture *f, opst_rng *r, int variant);

/* Calls the op on a fresh valid fixture: it must succeed and fully write every output. */
void errs_check_valid_call(errs_build_fn build, int variant, opst_rng *r);

/* Builds a fresh fixture, applies `fault`, calls, and checks the status, that the
 * message contains each of `needles` (NULL-terminated), and that no buffer changed. */
typedef void (*errs_fault_fn)(errs_fixture *f);
void errs_check(errs_build_fn build, int variant, opst_rng *r, const char *what, errs_fault_fn fault,
                ops_status want, const char *const *needles);

/* The descriptor-level faults, applied to each operand in turn. */
void errs_run_descriptor_faults(errs_build_fn build, int variant, opst_rng *r);

/* The shared handle-level faults: NULL handle, params with a wrong struct_size. */
void errs_run_call_faults(errs_build_fn build, int variant, opst_rng *r, const char *fn);

/* A table of op-specific faults: what, how, the status, up to 4 message needles. */
typedef struct errs_case {
  const char *what;
  errs_fault_fn fault;
  ops_status want;
  const char *needles[4];
} errs_case;

void errs_run_cases(errs_build_fn build, int variant, opst_rng *r, const errs_case *cases, size_t n);

#define ERRS_COUNT(a) (sizeof(a) / sizeof((a)[0]))

#define ERRS_NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

#endif /* OPSLIB_TESTS_ERRORS_HARNESS_H_ */
