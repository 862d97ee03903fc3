/*
 * opslib/explain.h: why the dispatcher chose a kernel, for any call, without running it.
 *
 * ops_X_explain() takes the same arguments as ops_X() and, instead of running, reports each
 * candidate kernel of the op: eligible (with its cost estimate) or the first rule it fails,
 * with a stable reason code and a message, and which one would run. Data pointers may be
 * NULL (only descriptors are read), so a call can be explained before memory exists.
 */
#ifndef OPSLIB_EXPLAIN_H_
#define OPSLIB_EXPLAIN_H_

#include <stddef.h>
#include <stdint.h>

#include "opslib/handle.h"
#include "opslib/ops.h"
#include "opslib/status.h"
#include "opslib/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why a kernel is or is not eligible. Stable values; new reasons are appended. */
typedef enum ops_reason {
  OPS_REASON_ELIGIBLE = 0,
  OPS_REASON_BACKEND = 1,     /* it runs on another kind of device */
  OPS_REASON_SM_TOO_OLD = 2,  /* the device (or the code this build has for it) is older */
  OPS_REASON_SM_TOO_NEW = 3,
  OPS_REASON_DTYPE = 4,       /* input dtype */
  OPS_REASON_OUT_DTYPE = 5,   /* output dtype */
  OPS_REASON_VARIANT = 6,     /* activation / binary op / reduce op not implemented */
  OPS_REASON_FEATURE = 7,     /* a feature of the call (causal, varlen, bias...) not implemented */
  OPS_REASON_ALIGNMENT = 8,   /* operands less aligned than it needs */
  OPS_REASON_SHAPE = 9,       /* an extent outside its limits */
  OPS_REASON_MATH_MODE = 10,  /* it rounds f32 to tf32 and the handle is strict */
  OPS_REASON_DETERMINISM = 11,/* the handle asks for determinism and it is not */
  OPS_REASON_SMEM = 12,       /* it needs more shared memory than the device has */
  OPS_REASON_NOT_PINNED = 13, /* another kernel is pinned for this op on the handle */
  OPS_REASON_CLUSTER = 14     /* its blocks run in clusters that share loads, and the call gives
                                 them different ranges (a window, varlen) or an odd tile count */
} ops_reason;

/* "eligible", "backend", "sm_too_old", ... */
OPS_API const char *ops_reason_name(ops_reason reason);

/* The int-coded operator mapping: "sdpa" <-> OPS_OP_SDPA. ops_op_name gives "unknown" for
 * an unknown id; ops_op_from_name gives 0 for an unknown name. Ops are 1..ops_op_count(). */
OPS_API const char *ops_op_name(ops_op op);
OPS_API ops_op ops_op_from_name(const char *name);
OPS_API int ops_op_count(void);

/* Names of pointwise functions ("gelu_tanh") and binary ops ("add"); "unknown" otherwise. */
OPS_API const char *ops_act_name(ops_act fn);
OPS_API const char *ops_binary_op_name(ops_binary_op op);

#define OPS_EXPLAIN_MAX_CANDIDATES 32

typedef struct ops_verdict {
  int32_t kernel_id;       /* stable */
  int32_t reason;          /* ops_reason */
  const char *kernel_name; /* static storage */
  double est_us;           /* cost estimate in microseconds (eligible kernels) */
  char message[192];       /* why not; for eligible kernels, the cost terms */
} ops_verdict;

typedef struct ops_explain {
  uint32_t struct_size;   /* set by the caller to sizeof(ops_explain) */
  int32_t op;             /* ops_op */
  int32_t chosen;         /* index into verdicts of the kernel that would run; -1: none */
  int32_t count;          /* candidates in verdicts */
  int32_t empty;          /* 1: the outputs have no elements, nothing would run */
  char problem[256];      /* the call as the dispatcher sees it */
  ops_verdict verdicts[OPS_EXPLAIN_MAX_CANDIDATES];
  /* Appended after 0.1.0's first layout; filled when struct_size covers them (a caller
   * built against the first layout passes its smaller size and gets the fields above). */
  int32_t choice;         /* ops_choice: how `chosen` was decided */
  int32_t measured;       /* verdicts with a measured time */
  double measured_us[OPS_EXPLAIN_MAX_CANDIDATES]; /* per verdict: measured time; 0: none */
  const char *plan[OPS_EXPLAIN_MAX_CANDIDATES];   /* per eligible verdict: the launch variant
                                                     it would take (static); NULL: it has one */
  char choice_note[192];  /* the choice in words: what was measured, or why nothing was */
} ops_explain;

/* The size of the first ops_explain layout, which explain still accepts. */
#define OPS_EXPLAIN_SIZE_V1 (offsetof(ops_explain, choice))

/* Each fills *out for the call with the same arguments. Validation is the op's own, minus
 * what needs memory (NULL data, contents of cu_seqlens, overlap). Returns OPS_OK also when
 * no kernel is eligible (out->chosen == -1); fails like the op on malformed arguments.
 * Errors additionally: OPS_ERR_NULL_POINTER (out), OPS_ERR_STRUCT_SIZE (out->struct_size). */
OPS_API ops_status ops_sdpa_explain(ops_handle handle, const ops_sdpa_params *params,
                                    const ops_tensor *q, const ops_tensor *k, const ops_tensor *v,
                                    const ops_tensor *o, const ops_tensor *lse, ops_explain *out);
OPS_API ops_status ops_sdpa_backward_explain(ops_handle handle, const ops_sdpa_params *params,
                                             const ops_tensor *q, const ops_tensor *k, const ops_tensor *v,
                                             const ops_tensor *o, const ops_tensor *lse, const ops_tensor *dout,
                                             const ops_tensor *dq, const ops_tensor *dk, const ops_tensor *dv,
                                             ops_explain *out);
OPS_API ops_status ops_gemm_explain(ops_handle handle, const ops_gemm_params *params,
                                    const ops_tensor *a, const ops_tensor *b, const ops_tensor *d,
                                    ops_explain *out);
OPS_API ops_status ops_layernorm_explain(ops_handle handle, const ops_norm_params *params,
                                         const ops_tensor *x, const ops_tensor *weight,
                                         const ops_tensor *y, ops_explain *out);
OPS_API ops_status ops_rmsnorm_explain(ops_handle handle, const ops_norm_params *params,
                                       const ops_tensor *x, const ops_tensor *weight,
                                       const ops_tensor *y, ops_explain *out);
OPS_API ops_status ops_layernorm_backward_explain(ops_handle handle, const ops_norm_backward_params *params,
                                                  const ops_tensor *dy, const ops_tensor *x,
                                                  const ops_tensor *weight, const ops_tensor *mean,
                                                  const ops_tensor *rstd, const ops_tensor *dx, ops_explain *out);
OPS_API ops_status ops_rmsnorm_backward_explain(ops_handle handle, const ops_norm_backward_params *params,
                                                const ops_tensor *dy, const ops_tensor *x, const ops_tensor *weight,
                                                const ops_tensor *rstd, const ops_tensor *dx, ops_explain *out);
OPS_API ops_status ops_softmax_backward_explain(ops_handle handle, const ops_softmax_params *params,
                                                const ops_tensor *dy, const ops_tensor *y, const ops_tensor *dx,
                                                ops_explain *out);
OPS_API ops_status ops_softmax_explain(ops_handle handle, const ops_softmax_params *params,
                                       const ops_tensor *x, const ops_tensor *y, ops_explain *out);
OPS_API ops_status ops_sin_affine_explain(ops_handle handle, const ops_sin_affine_params *params,
                                          const ops_tensor *x, const ops_tensor *y, ops_explain *out);
OPS_API ops_status ops_unary_explain(ops_handle handle, const ops_unary_params *params,
                                     const ops_tensor *x, const ops_tensor *y, ops_explain *out);
OPS_API ops_status ops_binary_explain(ops_handle handle, const ops_binary_params *params,
                                      const ops_tensor *a, const ops_tensor *b, const ops_tensor *y,
                                      ops_explain *out);
OPS_API ops_status ops_scale_explain(ops_handle handle, const ops_scale_params *params,
                                     const ops_tensor *x, const ops_tensor *y, ops_explain *out);
OPS_API ops_status ops_dropout_explain(ops_handle handle, const ops_dropout_params *params,
                                       const ops_tensor *x, const ops_tensor *y, ops_explain *out);
OPS_API ops_status ops_reduce_explain(ops_handle handle, const ops_reduce_params *params,
                                      const ops_tensor *x, const ops_tensor *y, ops_explain *out);
OPS_API ops_status ops_rope_explain(ops_handle handle, const ops_rope_params *params,
                                    const ops_tensor *positions, const ops_tensor *q, const ops_tensor *q_out,
                                    ops_explain *out);
OPS_API ops_status ops_kv_cache_append_explain(ops_handle handle, const ops_kv_cache_append_params *params,
                                               const ops_tensor *k, const ops_tensor *v,
                                               const ops_tensor *slot_mapping, const ops_tensor *k_cache,
                                               const ops_tensor *v_cache, ops_explain *out);

/* ---- the kernel catalog --------------------------------------------------------------- */

/* One pre-instantiated kernel and its capability metadata, as the dispatcher reads it. */
typedef struct ops_kernel_info {
  uint32_t struct_size;       /* set by the caller to sizeof(ops_kernel_info) */
  int32_t kernel_id;          /* stable */
  const char *name;           /* stable, unique */
  int32_t op;                 /* ops_op */
  int32_t backend;            /* ops_device_type */
  int32_t sm_min, sm_max;     /* SM range (CUDA) */
  uint32_t dtypes;            /* bit (1u << ops_dtype) per input dtype */
  uint32_t out_dtypes;        /* likewise for outputs */
  char features[160];         /* the call features it implements: "causal, window, gqa, ..." */
  char fuses[160];            /* the prologues / epilogues it absorbs */
  char limits[192];           /* shape limits and alignment, in words */
  char roles[192];            /* warp roles: "producer x4 warps (...); consumers x8 warps (...)"; where
                                 the whole text does not fit, names and warps alone, and
                                 ops_kernel_role has each role's work */
  int32_t stages;             /* async pipeline stages */
  const char *smem_layout;
  int32_t smem_bytes;
  int32_t threads;            /* per block */
  int32_t deterministic;
  const char *reduction_order;
  const char *workspace_formula;
  const char *unit;           /* the unit bounding its arithmetic: "cpu", "ffma", "wgmma_f16", ... */
  double efficiency;          /* fraction of peak the cost model assumes */
  const char *tests;          /* the test targets that exercise it */
  int32_t vector_bytes;       /* bytes per global-memory access of one thread */
  /* appended after 0.1.0's first layout, in what was its tail padding (the size is the same): */
  int32_t cluster_blocks;     /* blocks a cluster that share loads (1: no clusters) */
} ops_kernel_info;

/* Number of kernels in this build; ops_kernel_info_at(i) for i in 0..count-1. */
OPS_API int ops_kernel_count(void);
OPS_API ops_status ops_kernel_info_at(int index, ops_kernel_info *out);
OPS_API ops_status ops_kernel_info_by_name(const char *name, ops_kernel_info *out);

/* One warp role of a kernel, whole (appended after 0.1.0). */
typedef struct ops_warp_role {
  uint32_t struct_size; /* set by the caller to sizeof(ops_warp_role) */
  int32_t warps;        /* warps that play it */
  const char *name;     /* "producer", "consumers", "mma warps", ... (static storage) */
  const char *work;     /* what they do, a label of at most 100 characters (static storage);
                           the kernel's source header describes it in full */
} ops_warp_role;

/* The number of warp roles of the named kernel (0: host code); -1 when no kernel has that name. */
OPS_API int ops_kernel_role_count(const char *name);
/* Role `index` (0 .. ops_kernel_role_count(name) - 1) of the named kernel.
 * Errors: OPS_ERR_NULL_POINTER (name, out), OPS_ERR_STRUCT_SIZE, OPS_ERR_INVALID_ARGUMENT (no
 * kernel of that name; index out of range). */
OPS_API ops_status ops_kernel_role(const char *name, int index, ops_warp_role *out);

/* Renders e as text (one line per candidate) or as one JSON object into buf, truncated to
 * n bytes (always NUL-terminated when n > 0). Returns the length the whole rendering needs,
 * snprintf-style. */
OPS_API size_t ops_explain_to_text(const ops_explain *e, char *buf, size_t n);
OPS_API size_t ops_explain_to_json(const ops_explain *e, char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_EXPLAIN_H_ */
