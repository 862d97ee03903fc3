/* The error-injection engine of harness.h. */
#include "tests/errors/harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

ops_tensor *errs_add(errs_fixture *f, opst_rng *r, const char *name, int flags, int32_t dtype,
                     int ndim, const int64_t *shape) {
  assert_true(f->nargs < ERRS_MAX_ARGS);
  errs_arg *a = &f->args[f->nargs++];
  a->name = name;
  a->is_output = (flags & ERRS_OUTPUT) != 0;
  a->optional = (flags & ERRS_OPTIONAL) != 0;
  opst_alloc_any(&a->t, r, dtype, ndim, shape);
  if (!a->is_output) opst_fill_uniform(&a->t, r, -1, 1);
  assert_true(opst_numel(&a->t) > 0); /* every fault below needs elements */
  return &a->t.t;
}

void errs_dense_over(errs_fixture *f, const char *a, const char *b) {
  ops_tensor *ta = &errs_find(f, a)->t.t;
  const ops_tensor *tb = &errs_find(f, b)->t.t;
  int64_t lo, hi; /* b's reach below and above its data, in elements */
  opst_span(tb->ndim, tb->shape, tb->strides, &lo, &hi);
  const size_t eb = ops_dtype_size((ops_dtype)tb->dtype), ea = ops_dtype_size((ops_dtype)ta->dtype);
  assert_true((size_t)ops_tensor_numel(ta) * ea <= (size_t)(hi - lo + 1) * eb);
  int64_t shape[OPS_MAX_DIMS]; /* ops_tensor_init rewrites ta */
  memcpy(shape, ta->shape, sizeof shape);
  assert_int_equal(ops_tensor_init(ta, (unsigned char *)tb->data + lo * (int64_t)eb, (ops_dtype)ta->dtype,
                                   ta->device, ta->ndim, shape, NULL), OPS_OK);
}

static const char *g_null_target; /* the operand the NULL-descriptor fault removes */

const ops_tensor *errs_ptr(errs_fixture *f, const char *name) {
  if (g_null_target != NULL && strcmp(g_null_target, name) == 0) return NULL;
  for (int i = 0; i < f->nargs; ++i) {
    if (strcmp(f->args[i].name, name) == 0) return &f->args[i].t.t;
  }
  return NULL;
}

errs_arg *errs_find(errs_fixture *f, const char *name) {
  for (int i = 0; i < f->nargs; ++i) {
    if (strcmp(f->args[i].name, name) == 0) return &f->args[i];
  }
  print_error("fixture has no operand %s\n", name);
  fail();
  return NULL;
}

void errs_free(errs_fixture *f) {
  for (int i = 0; i < f->nargs; ++i) opst_free(&f->args[i].t);
  free(f->workspace_alloc);
  ops_handle_destroy(f->h);
  memset(f, 0, sizeof *f);
}

static void build_fresh(errs_fixture *f, errs_build_fn build, int variant, opst_rng *r) {
  memset(f, 0, sizeof *f);
  f->h = opst_cpu_handle();
  build(f, r, variant);
  for (int i = 0; i < f->nargs; ++i) opst_snapshot(&f->args[i].t);
}

void errs_check_valid_call(errs_build_fn build, int variant, opst_rng *r) {
  errs_fixture f;
  build_fresh(&f, build, variant, r);
  OPST_OK(f.call(&f));
  assert_string_equal(ops_last_error(), "");
  char why[256];
  for (int i = 0; i < f.nargs; ++i) {
    if (f.args[i].is_output && !opst_fully_written(&f.args[i].t, why, sizeof why)) {
      print_error("valid call: output %s: %s\n", f.args[i].name, why);
      fail();
    }
    if (!f.args[i].is_output && !opst_untouched(&f.args[i].t)) {
      print_error("valid call: input %s changed\n", f.args[i].name);
      fail();
    }
  }
  errs_free(&f);
}

void errs_check(errs_build_fn build, int variant, opst_rng *r, const char *what, errs_fault_fn fault,
                ops_status want, const char *const *needles) {
  errs_fixture f;
  build_fresh(&f, build, variant, r);
  fault(&f);
  for (int i = 0; i < f.nargs; ++i) opst_snapshot(&f.args[i].t); /* faults may edit contents */
  const ops_status got = f.call(&f);
  const char *msg = ops_last_error();
  if (got != want) {
    print_error("%s: expected %s, got %s (%s)\n", what, ops_status_name(want), ops_status_name(got), msg);
    fail();
  }
  for (const char *const *n = needles; *n != NULL; ++n) {
    if (strstr(msg, *n) == NULL) {
      print_error("%s: message \"%s\" lacks \"%s\"\n", what, msg, *n);
      fail();
    }
  }
  for (int i = 0; i < f.nargs; ++i) {
    if (!opst_untouched(&f.args[i].t)) {
      print_error("%s: the failed call changed the buffer of %s\n", what, f.args[i].name);
      fail();
    }
  }
  errs_free(&f);
}

/* ---- descriptor faults on operand g_target ---------------------------------------- */

static const char *g_target;

static ops_tensor *target(errs_fixture *f) { return &errs_find(f, g_target)->t.t; }

static void fault_null_data(errs_fixture *f) { target(f)->data = NULL; }
/* A dtype no operand of these ops accepts there, of an element size that keeps the
 * pointer aligned (else the alignment check, which reads the dtype, fires first). */
static void fault_dtype(errs_fixture *f) {
  ops_tensor *t = target(f);
  switch (t->dtype) {
    case OPS_DTYPE_I32: t->dtype = OPS_DTYPE_F32; break;
    case OPS_DTYPE_F32: t->dtype = OPS_DTYPE_I32; break;
    default: t->dtype = OPS_DTYPE_U8; break;
  }
}
static void fault_unknown_dtype(errs_fixture *f) { target(f)->dtype = 99; }
static void fault_ndim(errs_fixture *f) { target(f)->ndim = 9; }
static void fault_negative(errs_fixture *f) {
  ops_tensor *t = target(f);
  t->shape[t->ndim - 1] = -3;
}
static void fault_overflow(errs_fixture *f) {
  ops_tensor *t = target(f);
  t->shape[0] = INT64_MAX / 2;
  t->strides[0] = 4;
}
static void fault_struct_size(errs_fixture *f) { target(f)->struct_size = 0; }
static void fault_reserved(errs_fixture *f) { target(f)->reserved = 5; }
static void fault_device(errs_fixture *f) { target(f)->device = ops_device_cuda(0); }
static void fault_unknown_device(errs_fixture *f) { target(f)->device.type = 7; }
static void fault_misaligned(errs_fixture *f) {
  ops_tensor *t = target(f);
  t->data = (char *)t->data + 1;
}
static void fault_null_descriptor(errs_fixture *f) {
  (void)f;
  g_null_target = g_target;
}

void errs_run_descriptor_faults(errs_build_fn build, int variant, opst_rng *r) {
  errs_fixture probe;
  build_fresh(&probe, build, variant, r);
  const int n = probe.nargs;
  const char *names[ERRS_MAX_ARGS];
  int ndims[ERRS_MAX_ARGS], optional[ERRS_MAX_ARGS];
  for (int i = 0; i < n; ++i) {
    names[i] = probe.args[i].name;
    ndims[i] = probe.args[i].t.t.ndim;
    optional[i] = probe.args[i].optional;
  }
  errs_free(&probe);
  char what[128];
  for (int i = 0; i < n; ++i) {
    g_target = names[i];
#define CHECK(label, fault, status, ...)                                    \
  do {                                                                      \
    snprintf(what, sizeof what, "%s: %s", names[i], label);                 \
    errs_check(build, variant, r, what, fault, status, ERRS_NEEDLES(__VA_ARGS__)); \
  } while (0)
    if (!optional[i]) {
      CHECK("NULL descriptor", fault_null_descriptor, OPS_ERR_NULL_POINTER, names[i], "expected", "got NULL");
      g_null_target = NULL;
    }
    CHECK("NULL data with elements", fault_null_data, OPS_ERR_NULL_POINTER, names[i], "data", "got NULL");
    CHECK("wrong dtype", fault_dtype, OPS_ERR_DTYPE_MISMATCH, names[i], "dtype", "expected", "got");
    CHECK("unknown dtype", fault_unknown_dtype, OPS_ERR_DTYPE_MISMATCH, names[i], "got 99");
    CHECK("ndim 9", fault_ndim, OPS_ERR_BAD_NDIM, names[i], "expected 0..8, got 9");
    if (ndims[i] > 0) {
      CHECK("negative extent", fault_negative, OPS_ERR_BAD_SIZE, names[i], "non-negative", "-3");
      CHECK("overflowing size", fault_overflow, OPS_ERR_BAD_SIZE, names[i], "int64");
    }
    CHECK("struct_size 0", fault_struct_size, OPS_ERR_STRUCT_SIZE, names[i], "struct_size", "got 0");
    CHECK("reserved 5", fault_reserved, OPS_ERR_INVALID_ARGUMENT, names[i], "reserved: expected 0", "got 5");
    CHECK("on cuda:0", fault_device, OPS_ERR_DEVICE_MISMATCH, names[i], "expected cpu", "got cuda:0");
    CHECK("unknown device", fault_unknown_device, OPS_ERR_DEVICE_MISMATCH, names[i], "got device type 7");
    CHECK("misaligned data", fault_misaligned, OPS_ERR_MISALIGNED, names[i], "aligned to", "got 0x");
#undef CHECK
  }
}

/* ---- call-level faults ------------------------------------------------------------ */

static ops_handle g_saved_handle;

static void fault_null_handle(errs_fixture *f) {
  g_saved_handle = f->h;
  f->h = NULL;
}

static void fault_params_size(errs_fixture *f) { f->p.sdpa.struct_size = 3; /* first field of every params */ }

void errs_run_call_faults(errs_build_fn build, int variant, opst_rng *r, const char *fn) {
  errs_fixture f;
  build_fresh(&f, build, variant, r);
  fault_null_handle(&f);
  const ops_status st = f.call(&f);
  if (st != OPS_ERR_NULL_POINTER || strstr(ops_last_error(), "handle") == NULL) {
    print_error("%s with a NULL handle: %s (%s)\n", fn, ops_status_name(st), ops_last_error());
    fail();
  }
  for (int i = 0; i < f.nargs; ++i) assert_true(opst_untouched(&f.args[i].t));
  f.h = g_saved_handle;
  errs_free(&f);
  errs_check(build, variant, r, "params struct_size 3", fault_params_size, OPS_ERR_STRUCT_SIZE,
             ERRS_NEEDLES(fn, "struct_size", "got 3"));
}

void errs_run_cases(errs_build_fn build, int variant, opst_rng *r, const errs_case *cases, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const char *needles[5] = {cases[i].needles[0], cases[i].needles[1], cases[i].needles[2],
                              cases[i].needles[3], NULL};
    errs_check(build, variant, r, cases[i].what, cases[i].fault, cases[i].want, needles);
  }
}
