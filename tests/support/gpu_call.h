/*
 * The GPU op tests' shared call harness: one op call (gcall: its tensors, their roles, the
 * CPU reference's outputs, the op's parameters and a run function) run on the CPU handle
 * and then on the GPU once per CUDA kernel of its op, pinned by name, with the checks every
 * family shares (poisoned outputs, nothing written outside the views or on a refusal,
 * relative error against the reference); the random shapes and layouts the families draw
 * from; the handles and the seed. tests/gpu/ops_<family>.c hold the families' cases.
 */
#ifndef OPSLIB_TESTS_SUPPORT_GPU_CALL_H_
#define OPSLIB_TESTS_SUPPORT_GPU_CALL_H_

#include <stddef.h>
#include <stdint.h>

#include "opslib/opslib.h"
#include "tests/support/opst.h"

extern int g_have_cuda;     /* a CUDA device is there (else the dry run: explained on an H100) */
extern ops_handle g_cpu, g_gpu;
extern opst_rng g_rng;
extern int g_runs, g_refusals; /* kernel runs checked against the CPU, pinned refusals checked */
extern int g_tf32;          /* the GPU handle allows tf32 (the tolerance of f32 results) */
extern int g_layout;        /* the layout pick_layout drew */
extern const int32_t kDtypes[3];

enum { MAXT = 12 };
enum { IN = 0, OUT = 1, SCRATCH = 2 }; /* SCRATCH: may be written (unfused chains), not checked */

typedef struct gcall gcall;
/* Runs the op on h with the descriptors c->v; with `query`, asks its workspace size instead;
 * with `ex`, explains it instead. */
typedef ops_status (*run_fn)(ops_handle h, gcall *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *ex);

struct gcall {
  int32_t op;
  const char *label;
  int n;
  opst_tensor *h[MAXT];      /* what the GPU sees; an in-place output is a clone of its input */
  int role[MAXT];
  int alias[MAXT];           /* an output in place on input alias[i]; else -1 */
  opst_tensor ref[MAXT];     /* outputs: the CPU's, contiguous */
  const double *scale[MAXT]; /* outputs: per-element error scale; NULL: max |ref| */
  int no_l2[MAXT];           /* outputs whose sums may cancel (reductions): element bound only */
  double scale_floor;        /* > 0: an output without a scale whose largest |ref| is below it
                                (its sums cancel whole) takes it as every element's scale */
  ops_tensor v[MAXT];
  run_fn run;
  /* op parameters */
  ops_norm_params norm;
  ops_norm_backward_params norm_bwd;
  ops_softmax_params softmax;
  ops_reduce_params reduce;
  ops_sin_affine_params sin;
  ops_unary_params unary;
  ops_binary_params binary;
  ops_scale_params scale_p;
  ops_dropout_params dropout;
  ops_gemm_params gemm;
  ops_sdpa_params sdpa;
  ops_rope_params rope;
  ops_kv_cache_append_params append;
  int has[MAXT]; /* optional operands present */
};

void add_tensor(gcall *c, opst_tensor *t, int role, int alias);
void clone_tensor(opst_tensor *dst, const opst_tensor *src);
ops_tensor relocated(const opst_tensor *x, void *mem);
double l2_tol(int32_t dt);
double elem_tol(int32_t dt);
int compare(const opst_tensor *out, const opst_tensor *ref, const double *scale, double floor, int use_l2, char *why,
            size_t n);
int gpu_run(gcall *c, void **mem, const char *kernel);
int is_contiguous(const ops_tensor *t);
void dry_call(gcall *c);
void check_call(gcall *c);
void free_call(gcall *c);
void lead_shape(opst_rng *r, int nd, int64_t cap, int64_t *s);
int64_t pick_cols(opst_rng *r);
void pick_layout(void);
void alloc_x(opst_tensor *t, int32_t dt, int nd, const int64_t *s);
void add_absent(gcall *c);

#endif /* OPSLIB_TESTS_SUPPORT_GPU_CALL_H_ */
