/*
 * Evaluation, choice, and the three ways a call ends: run, workspace query, explain.
 *
 * A run looks its problem up in the handle's plan cache first (no lock, no allocation);
 * on a miss every candidate row is checked against the rules, the eligible ones are
 * ranked by the cost model, a measured choice for the problem's shape bucket (autotune.h)
 * overrides the model where its kernel is eligible, and the winner is cached. With
 * autotune on, a model's choice is cached as pending: the first run that may time its
 * candidates does, and caches the fastest. Explain always evaluates in full.
 */
#include "dispatch/dispatch.h"

#include <math.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <string.h>

#include "dispatch/autotune.h"
#include "dispatch/cost.h"
#include "dispatch/op_names.h"
#include "dispatch/rules.h"
#include "runtime/cuda_device.h"
#include "runtime/error.h"
#include "runtime/handle_internal.h"
#include "runtime/profiler.h"

_Static_assert(sizeof(opsi_problem) % sizeof(uint64_t) == 0, "the problem is hashed as whole words");
_Static_assert(sizeof(opsi_problem) / sizeof(uint64_t) <= OPSI_CACHE_KEY_WORDS, "the problem fits a cache key");
#define KEY_WORDS ((int)(sizeof(opsi_problem) / sizeof(uint64_t)))

void opsi_problem_init(opsi_problem *p, int32_t op, ops_handle handle) {
  memset(p, 0, sizeof *p);
  p->op = op;
  p->backend = handle->device.type;
  p->sm = handle->info.code_sm; /* what the build can run there decides eligibility */
  p->sm_count = handle->device.type == OPS_DEVICE_CUDA ? handle->info.sm_count : 0;
  p->math_mode = handle->math_mode;
  p->deterministic = handle->deterministic;
  p->align = 16;
}

void opsi_problem_add_align(opsi_problem *p, const ops_tensor *t) {
  if (t != NULL) {
    const int32_t a = opsi_tensor_align(t);
    if (a < p->align) p->align = a;
  }
}

void opsi_problem_add_row_layout(opsi_problem *p, const ops_tensor *t) {
  if (t == NULL) return;
  opsi_problem_add_align(p, t);
  const int last = t->ndim - 1;
  if (last >= 0 && t->shape[last] > 1 && t->strides[last] != 1) p->flags |= OPSI_F_STRIDED;
}

void opsi_problem_add_base_align(opsi_problem *p, const ops_tensor *t) {
  if (t == NULL || ops_tensor_numel(t) == 0) return;
  const uint64_t bits = (uint64_t)(uintptr_t)t->data | 16u;
  const int32_t a = (int32_t)(bits & (~bits + 1));
  if (a < p->align) p->align = a;
}

static int32_t pinned_for(const opsi_vctx *v, int32_t op) {
  return op > 0 && op < OPSI_OP_SLOTS ? v->handle->pinned[op] : 0;
}

/* One row's verdict for p: the handle's pin, then the rules (why not into msg); an eligible
 * row's cost into *c. A row with a twin (rows.h) costs at least what the twin does where the
 * twin takes the call too. */
static ops_reason judge(const opsi_vctx *v, const opsi_problem *p, const opsi_kernel_row *row, char *msg,
                        size_t len, opsi_cost *c) {
  const int32_t pinned = pinned_for(v, p->op);
  if (pinned != 0 && row->id != pinned) {
    snprintf(msg, len, "kernel id %d is pinned for this op (ops_handle_pin_kernel / OPSLIB_FORCE_KERNEL)", pinned);
    return OPS_REASON_NOT_PINNED;
  }
  const ops_reason r = opsi_rules_check(p, row, &v->handle->info, msg, len);
  if (r != OPS_REASON_ELIGIBLE) return r;
  opsi_estimate(p, row, &v->handle->info, c);
  if (row->twin != 0 && pinned == 0) {
    size_t n = 0;
    const opsi_kernel_row *rows = opsi_rows_for_op(p->op, &n);
    char why[8];
    for (size_t i = 0; i < n; ++i) {
      opsi_cost tc;
      if (rows[i].id != row->twin || rows[i].twin != 0) continue;
      if (opsi_rules_check(p, &rows[i], &v->handle->info, why, sizeof why) != OPS_REASON_ELIGIBLE) break;
      opsi_estimate(p, &rows[i], &v->handle->info, &tc);
      if (tc.us > c->us) c->us = tc.us, c->twin_name = rows[i].name;
      break;
    }
  }
  return r;
}

const opsi_kernel_row *opsi_evaluate(const opsi_vctx *v, const opsi_problem *p, ops_verdict *verdicts, int *count) {
  size_t n = 0;
  const opsi_kernel_row *rows = opsi_rows_for_op(p->op, &n);
  const opsi_kernel_row *best = NULL;
  double best_us = INFINITY;
  char scratch[192];
  int k = 0;
  for (size_t i = 0; i < n; ++i) {
    ops_verdict *out = verdicts != NULL && k < OPS_EXPLAIN_MAX_CANDIDATES ? &verdicts[k++] : NULL;
    char *msg = out != NULL ? out->message : scratch;
    const size_t len = out != NULL ? sizeof out->message : sizeof scratch;
    opsi_cost c;
    const ops_reason r = judge(v, p, &rows[i], msg, len, &c);
    const double us = r == OPS_REASON_ELIGIBLE ? c.us : 0.0;
    if (r == OPS_REASON_ELIGIBLE) {
      if (out != NULL) opsi_format_cost(&c, msg, len);
      if (us < best_us) {
        best_us = us;
        best = &rows[i];
      }
    }
    if (out != NULL) {
      out->kernel_id = rows[i].id;
      out->kernel_name = rows[i].name;
      out->reason = r;
      out->est_us = us;
    }
  }
  if (count != NULL) *count = k;
  return best;
}

static ops_status unsupported(const opsi_vctx *v, const opsi_problem *p) {
  ops_verdict verdicts[OPS_EXPLAIN_MAX_CANDIDATES];
  int count = 0;
  opsi_evaluate(v, p, verdicts, &count);
  char where[96];
  if (p->backend == OPS_DEVICE_CUDA) {
    snprintf(where, sizeof where, "cuda:%d (sm_%d, running sm_%d code)", (int)v->handle->device.ordinal,
             v->handle->info.sm_version, p->sm);
  } else {
    snprintf(where, sizeof where, "cpu");
  }
  opsi_fail(OPS_ERR_UNSUPPORTED, "%s: no kernel of this build supports the call on %s;", v->fn, where);
  /* the rows refused for a reason of their own first (a pinned row's is the one that
   * matters), then, by name alone, the rows a pin left out: the message stays within its
   * buffer however many rows the op has */
  int left_out = 0;
  for (int i = 0; i < count; ++i) {
    if (verdicts[i].reason == OPS_REASON_NOT_PINNED) {
      ++left_out;
      continue;
    }
    opsi_append_error(" %s [%s]: %s;", verdicts[i].kernel_name, ops_reason_name((ops_reason)verdicts[i].reason),
                      verdicts[i].message);
  }
  if (left_out > 0) {
    opsi_append_error(" kernel id %d is pinned for this op (ops_handle_pin_kernel / OPSLIB_FORCE_KERNEL), leaving out",
                      (int)pinned_for(v, p->op));
    for (int i = 0; i < count; ++i) {
      if (verdicts[i].reason == OPS_REASON_NOT_PINNED) opsi_append_error(" %s [not_pinned];", verdicts[i].kernel_name);
    }
  }
  return OPS_ERR_UNSUPPORTED;
}

/* Inserts row (estimate us) into ranked[0..*k), cheapest first; an equal estimate goes after
 * the rows already there (table order). */
static void insert_ranked(const opsi_kernel_row **ranked, double *est, int *k, const opsi_kernel_row *row, double us) {
  int at = (*k)++;
  for (; at > 0 && est[at - 1] > us; --at) {
    est[at] = est[at - 1];
    ranked[at] = ranked[at - 1];
  }
  est[at] = us;
  ranked[at] = row;
}

/* The eligible rows of p, cheapest estimate first (ties in table order): their count. */
static int rank(const opsi_vctx *v, const opsi_problem *p, const opsi_kernel_row **ranked) {
  size_t n = 0;
  const opsi_kernel_row *rows = opsi_rows_for_op(p->op, &n);
  double est[OPS_EXPLAIN_MAX_CANDIDATES];
  char msg[192];
  int k = 0;
  for (size_t i = 0; i < n && k < OPS_EXPLAIN_MAX_CANDIDATES; ++i) {
    opsi_cost c;
    if (judge(v, p, &rows[i], msg, sizeof msg, &c) == OPS_REASON_ELIGIBLE) insert_ranked(ranked, est, &k, &rows[i], c.us);
  }
  return k;
}

/* A plan-cache value: the row, and how it was chosen. */
enum { CHOICE_MASK = 0xFF, PENDING = 1 << 8 /* autotune may still time this problem */ };

static void cache_put(const opsi_vctx *v, const opsi_problem *p, const opsi_kernel_row *row, uint64_t how) {
  const uint64_t value[2] = {(uint64_t)(uintptr_t)row, how};
  opsi_plan_cache_put(&v->handle->cache, (const uint64_t *)(const void *)p, KEY_WORDS, value);
}

/* The decision among the eligible rows ranked[0..n) (n >= 1), for runs and explain alike:
 * the pinned row; else the shape bucket's measured choice where it is eligible; else the
 * cheapest estimate. *choice says which (ops_choice); *found: the bucket has a measured
 * entry, copied into *t (it may name a kernel not eligible here). */
static const opsi_kernel_row *decide(const opsi_vctx *v, const opsi_problem *p, const opsi_kernel_row *const *ranked,
                                     int n, int32_t *choice, opsi_tune_entry *t, int *found) {
  *found = 0;
  if (pinned_for(v, p->op) != 0) {
    *choice = OPS_CHOICE_PINNED;
    return ranked[0];
  }
  *choice = OPS_CHOICE_MODEL;
  *found = opsi_tune_lookup(v->handle, p, t);
  for (int i = 0; *found && i < n; ++i) {
    if (ranked[i]->id == t->kernel_id) {
      *choice = t->source;
      return ranked[i];
    }
  }
  return ranked[0];
}

/* The chosen row, from the plan cache or a full evaluation (then cached), with how it was
 * chosen (ops_choice) and whether autotune may still time the problem. */
static const opsi_kernel_row *choose(const opsi_vctx *v, const opsi_problem *p, int *hit, int32_t *choice,
                                     int *pending) {
  uint64_t value[2];
  if (opsi_plan_cache_get(&v->handle->cache, (const uint64_t *)(const void *)p, KEY_WORDS, value)) {
    *hit = 1;
    *choice = (int32_t)(value[1] & CHOICE_MASK);
    *pending = (value[1] & PENDING) != 0;
    return (const opsi_kernel_row *)(uintptr_t)value[0];
  }
  *hit = 0;
  *pending = 0;
  const opsi_kernel_row *ranked[OPS_EXPLAIN_MAX_CANDIDATES];
  const int n = rank(v, p, ranked);
  if (n == 0) return NULL;
  opsi_tune_entry t;
  int found = 0;
  const opsi_kernel_row *row = decide(v, p, ranked, n, choice, &t, &found);
  *pending = *choice == OPS_CHOICE_MODEL && n >= 2 && v->handle->autotune == OPS_AUTOTUNE_MEASURE;
  cache_put(v, p, row, (uint64_t)*choice | (*pending ? PENDING : 0));
  return row;
}

static size_t row_workspace(const opsi_kernel_row *row, const opsi_problem *p) {
  return row->workspace != NULL ? row->workspace(p) : 0;
}

/* explain's account of how the choice was made (the fields after the first layout): each
 * eligible candidate's launch plan, the measured times, and the choice in words. */
static void explain_choice(const opsi_vctx *v, const opsi_problem *p, ops_explain *e, int eligible,
                           const opsi_tune_entry *t) {
  size_t nrows = 0;
  const opsi_kernel_row *rows = opsi_rows_for_op(p->op, &nrows);
  for (int i = 0; i < e->count; ++i) {
    if (e->verdicts[i].reason == OPS_REASON_ELIGIBLE && rows[i].plan != NULL) e->plan[i] = rows[i].plan(p);
  }
  size_t used = 0;
  char *note = e->choice_note;
  const size_t n = sizeof e->choice_note;
#define NOTE(...)                                                                \
  do {                                                                           \
    if (used < n) used += (size_t)snprintf(note + used, n - used, __VA_ARGS__); \
  } while (0)
  if (e->choice == OPS_CHOICE_MEASURED || e->choice == OPS_CHOICE_TUNE_CACHE) {
    NOTE("%s:", e->choice == OPS_CHOICE_MEASURED ? "timed on this handle" : "timed earlier (tune cache)");
    for (int k = 0; k < t->count; ++k) {
      for (int i = 0; i < e->count; ++i) {
        if (e->verdicts[i].kernel_id != t->ids[k]) continue;
        e->measured_us[i] = t->us[k];
        ++e->measured;
        NOTE(" %s %.2f us%s", e->verdicts[i].kernel_name, t->us[k], k + 1 < t->count ? "," : "");
      }
    }
  } else if (e->choice == OPS_CHOICE_PINNED) {
    NOTE("pinned (ops_handle_pin_kernel / OPSLIB_FORCE_KERNEL)");
  } else if (e->chosen >= 0) {
    const char *blocker = opsi_tune_blocker(v, eligible);
    if (t != NULL) NOTE("the measured choice of this shape bucket is not eligible here; ");
    if (blocker != NULL) {
      NOTE("the cost model's lowest estimate: %s", blocker);
    } else {
      NOTE("the cost model's lowest estimate, until the first run times the best %d (autotune)",
           eligible < OPS_AUTOTUNE_TOP_K ? eligible : OPS_AUTOTUNE_TOP_K);
    }
  }
#undef NOTE
}

static ops_status explain(const opsi_vctx *v, const opsi_problem *p, int empty) {
  ops_explain *e = v->explain_out;
  const uint32_t size = e->struct_size; /* sizeof(ops_explain) or OPS_EXPLAIN_SIZE_V1 (opsi_check_call) */
  memset(e, 0, size);
  e->struct_size = size;
  e->op = p->op;
  e->empty = empty;
  opsi_describe_problem(p, e->problem, sizeof e->problem);
  int count = 0;
  opsi_evaluate(v, p, e->verdicts, &count);
  e->count = count;
  e->chosen = -1;
  /* the run's decision, over the eligible verdicts ranked by their estimates (verdict i is
   * row i of the op) */
  size_t nrows = 0;
  const opsi_kernel_row *rows = opsi_rows_for_op(p->op, &nrows);
  const opsi_kernel_row *ranked[OPS_EXPLAIN_MAX_CANDIDATES];
  double est[OPS_EXPLAIN_MAX_CANDIDATES];
  int n = 0;
  for (int i = 0; i < count; ++i) {
    if (e->verdicts[i].reason == OPS_REASON_ELIGIBLE) insert_ranked(ranked, est, &n, &rows[i], e->verdicts[i].est_us);
  }
  if (n == 0) return OPS_OK;
  int32_t choice = OPS_CHOICE_MODEL;
  opsi_tune_entry t;
  int found = 0;
  const opsi_kernel_row *row = decide(v, p, ranked, n, &choice, &t, &found);
  e->chosen = (int32_t)(row - rows);
  if (size < sizeof(ops_explain)) return OPS_OK; /* the first layout has no room for the rest */
  e->choice = choice;
  explain_choice(v, p, e, n, found ? &t : NULL);
  return OPS_OK;
}

static _Thread_local int t_fail_launches;

void opsi_fail_next_cuda_launches(int n) { t_fail_launches = n; }

ops_status opsi_run_row(const char *fn, const opsi_kernel_row *row, const opsi_launch *ctx, const void *args) {
  memset(&ctx->info->error, 0, sizeof ctx->info->error);
  if (row->backend == OPS_DEVICE_CUDA && t_fail_launches > 0) {
    --t_fail_launches;
    opsi_cuda_launch_invalid(ctx->stream);
    return opsi_cuda_check_launch(fn);
  }
  const ops_status st = row->launch(ctx, args);
  if (st != OPS_OK) {
    const opsi_launch_error *e = &ctx->info->error;
    if (e->what == NULL) return st; /* a CPU launcher, which wrote its message */
    if (e->code != 0 && row->backend == OPS_DEVICE_CUDA && strcmp(e->what, "launch") == 0) {
      return opsi_fail(st, "%s: %s: launch: %s (%s, error %d)", fn, row->name, e->detail ? e->detail : "failed",
                       opsi_cuda_error_name(e->code), (int)e->code);
    }
    if (e->code != 0) {
      return opsi_fail(st, "%s: %s: %s: %s (error %d)", fn, row->name, e->what, e->detail ? e->detail : "failed",
                       (int)e->code);
    }
    if (e->detail != NULL) return opsi_fail(st, "%s: %s: %s: %s", fn, row->name, e->what, e->detail);
    return opsi_fail(st, "%s: %s: %s", fn, row->name, e->what);
  }
  return row->backend == OPS_DEVICE_CUDA ? opsi_cuda_check_launch(fn) : OPS_OK;
}

static ops_status launch(const opsi_vctx *v, const opsi_problem *p, const opsi_kernel_row *row, int hit,
                         int32_t choice, const void *args, void *workspace, size_t workspace_bytes) {
  opsi_launch_info info;
  memset(&info, 0, sizeof info);
  const opsi_launch ctx = {v->handle,       v->handle->info.sm_count, v->handle->stream, workspace,
                           workspace_bytes, &info,                    v->handle->info.sm_version};
  opsi_profile_token tok;
  const int profiling = opsi_profile_begin(v->handle, &tok);
  nvtxRangePushA(row->name);
  const ops_status st = opsi_run_row(v->fn, row, &ctx, args);
  nvtxRangePop();
  if (profiling) {
    char problem[256];
    opsi_describe_problem(p, problem, sizeof problem);
    ops_profile_record rec;
    memset(&rec, 0, sizeof rec);
    rec.struct_size = (uint32_t)sizeof rec;
    rec.op = p->op;
    rec.op_name = ops_op_name((ops_op)p->op);
    rec.kernel_id = row->id;
    rec.kernel_name = row->name;
    rec.device = v->handle->device;
    memcpy(rec.grid, info.grid, sizeof rec.grid);
    memcpy(rec.block, info.block, sizeof rec.block);
    rec.smem_bytes = info.smem_bytes;
    rec.plan_cache_hit = hit;
    rec.choice = choice;
    rec.launch_plan = info.plan;
    rec.cluster_blocks = row->backend == OPS_DEVICE_CUDA ? (info.cluster > 1 ? info.cluster : 1) : 0;
    opsi_work(p, &rec.bytes, &rec.flops);
    rec.problem = problem;
    opsi_profile_end(v->handle, &tok, &rec);
  }
  return st;
}

static _Thread_local int t_check_only;

void opsi_set_check_only(int on) { t_check_only = on; }

ops_status opsi_finish(const opsi_vctx *v, const opsi_problem *p, const void *args, int empty,
                       void *workspace, size_t workspace_bytes) {
  if (v->mode == OPSI_EXPLAIN) {
    return explain(v, p, empty);
  }
  if (empty) {
    if (v->mode == OPSI_QUERY_WORKSPACE) *v->workspace_out = 0;
    return OPS_OK;
  }
  int hit = 0, pending = 0;
  int32_t choice = OPS_CHOICE_MODEL;
  const opsi_kernel_row *row = choose(v, p, &hit, &choice, &pending);
  if (row == NULL) {
    return unsupported(v, p);
  }
  const int tune = pending && opsi_tune_blocker(v, 2) == NULL; /* pending: two or more eligible */
  const opsi_kernel_row *ranked[OPS_EXPLAIN_MAX_CANDIDATES];
  const int n = tune ? rank(v, p, ranked) : 0;
  if (v->mode == OPSI_QUERY_WORKSPACE) {
    size_t need = row_workspace(row, p);
    for (int i = 0; i < n && i < OPS_AUTOTUNE_TOP_K; ++i) {
      const size_t w = row_workspace(ranked[i], p);
      if (w > need) need = w; /* whichever the first run's timing picks */
    }
    *v->workspace_out = need;
    return OPS_OK;
  }
  if (v->handle->is_virtual) {
    return opsi_fail(OPS_ERR_UNSUPPORTED_DEVICE,
                     "%s: handle: a described device (ops_handle_create_virtual) can explain and size "
                     "workspaces, not run; create one with ops_handle_create", v->fn);
  }
  if (row->backend == OPS_DEVICE_CUDA) {
    OPSI_TRY(opsi_cuda_check_current(v->fn, v->handle->device.ordinal));
  }
  if (t_check_only) {
    return opsi_check_workspace(v, workspace, workspace_bytes, row_workspace(row, p));
  }
  if (n >= 2) {
    /* measuring runs candidates, which write the outputs: the workspace argument itself is
     * checked first, so that a call it fails writes nothing */
    OPSI_TRY(opsi_check_workspace(v, workspace, workspace_bytes, 0));
    if (workspace_bytes > 0 && (uintptr_t)workspace % 16 != 0) {
      return opsi_fail(OPS_ERR_MISALIGNED, "%s: workspace: expected an address aligned to 16 bytes, got %p", v->fn,
                       workspace);
    }
    int measured = 0;
    OPSI_TRY(opsi_tune_measure(v, p, ranked, n, args, workspace, workspace_bytes, &row, &measured));
    choice = measured ? OPS_CHOICE_MEASURED : OPS_CHOICE_MODEL;
    cache_put(v, p, row, (uint64_t)choice); /* no longer pending either way */
  }
  OPSI_TRY(opsi_check_workspace(v, workspace, workspace_bytes, row_workspace(row, p)));
  return launch(v, p, row, hit, choice, args, workspace, workspace_bytes);
}

void opsi_describe_problem(const opsi_problem *p, char *buf, size_t n) {
  size_t used = 0;
#define PUT(...)                                                              \
  do {                                                                        \
    if (used < n) used += (size_t)snprintf(buf + used, n - used, __VA_ARGS__); \
  } while (0)
  PUT("%s %s -> %s on ", ops_op_name((ops_op)p->op), ops_dtype_name((ops_dtype)p->dtype),
      ops_dtype_name((ops_dtype)p->out_dtype));
  if (p->backend == OPS_DEVICE_CUDA) PUT("cuda sm_%d:", p->sm); else PUT("cpu:");
  for (int i = 0; i < 8; ++i) {
    const char *name = opsi_dim_name(p->op, i);
    if (strncmp(name, "dims[", 5) == 0) break;
    PUT(" %s=%lld", name, (long long)p->dims[i]);
  }
  if (p->op == OPS_OP_SDPA && (p->extra[0] >= 0 || p->extra[1] >= 0)) {
    PUT(" window=(%lld, %lld)", (long long)p->extra[0], (long long)p->extra[1]);
  }
  if (p->op == OPS_OP_ROPE || (p->op == OPS_OP_KV_CACHE_APPEND && (p->flags & OPSI_F_ROPE))) {
    PUT(" style=%s", p->variant == OPS_ROPE_GPTJ ? "gptj" : p->variant == OPS_ROPE_NEOX ? "neox" : "unknown");
  } else if (p->variant != 0) {
    PUT(" variant=%d", p->variant);
  }
  if (p->flags != 0) {
    char flags[160];
    PUT(" [%s]", opsi_flag_names(p->flags, flags, sizeof flags));
  }
  PUT(" align=%d", p->align);
  if (p->math_mode == OPS_MATH_ALLOW_TF32) PUT(" tf32");
  if (p->deterministic) PUT(" deterministic");
#undef PUT
}
