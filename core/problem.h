/*
 * The dispatcher's vocabulary, which the capability rows, the dispatch layer and the kernels'
 * workspace functions share: the features a call uses (OPSI_F_*), the problem (the
 * dispatcher's summary of one call, which decides eligibility, cost and workspace) and which
 * of its dims holds what, per op. Plain C data; nothing here knows about kernels.
 */
#ifndef OPSLIB_CORE_PROBLEM_H_
#define OPSLIB_CORE_PROBLEM_H_

#include <stddef.h>
#include <stdint.h>

/* Features a call uses; a kernel row lists the ones it supports. */
enum {
  OPSI_F_CAUSAL = 1u << 0,
  OPSI_F_WINDOW = 1u << 1,
  OPSI_F_GQA = 1u << 2,          /* Hq > Hkv */
  OPSI_F_VARLEN = 1u << 3,
  OPSI_F_LSE = 1u << 4,
  OPSI_F_MASK = 1u << 5,         /* additive attention mask */
  OPSI_F_BIAS = 1u << 6,
  OPSI_F_RESIDUAL = 1u << 7,     /* GEMM residual add; norm residual input */
  OPSI_F_RESIDUAL_OUT = 1u << 8, /* norm: x + residual written out */
  OPSI_F_BETA_C = 1u << 9,       /* GEMM: beta * C */
  OPSI_F_BATCHED = 1u << 10,     /* GEMM: batch > 1 */
  OPSI_F_STATS_OUT = 1u << 11,   /* norm: mean / rstd written out */
  OPSI_F_BROADCAST = 1u << 12,   /* elementwise: some input broadcasts */
  OPSI_F_STRIDED = 1u << 13,     /* some operand is not contiguous row-major */
  OPSI_F_KEEPDIM = 1u << 14,     /* reduce */
  OPSI_F_DV_NE_D = 1u << 15,     /* SDPA: value head dim differs from the query's */
  /* reduce layouts (after collapsing dims), as features only the general kernels have: */
  OPSI_F_REDUCE_NOT_INNER = 1u << 16,  /* the reduced elements are not one unit-stride innermost run */
  OPSI_F_REDUCE_NOT_COLUMNS = 1u << 17, /* not [R, K] with the K outputs one unit-stride run */
  OPSI_F_DWEIGHT = 1u << 18,            /* norm backward: dweight written */
  /* GEMM operand layouts (either is still "not strided": one of its two axes is unit-stride) */
  OPSI_F_A_M_MAJOR = 1u << 19, /* A's K axis is not unit-stride (A is read down its columns) */
  OPSI_F_B_N_MAJOR = 1u << 20, /* B's K axis is not unit-stride (row-major [K, N]) */
  /* SDPA over a KV cache */
  OPSI_F_KV_CACHE = 1u << 21, /* per-sequence key counts (kv_lens) in a cache of a capacity */
  OPSI_F_PAGED = 1u << 22,    /* K and V in pages named by a block table */
  OPSI_F_ROPE = 1u << 23,     /* kv_cache_append: K rotated on its way into the cache */
  OPSI_F_HEADS_APART = 1u << 24 /* kv_cache_append: some operand's heads of a token are not one unit-stride run */
};

/* The dispatcher's summary of one call. Plain data: compared and hashed as bytes by the
 * plan cache, so every field is always fully written (unused ones 0). */
typedef struct opsi_problem {
  int32_t op;            /* ops_op */
  int32_t backend;       /* ops_device_type of the handle */
  int32_t sm;            /* SM of the code the build runs on the device (code_sm); 0 on the CPU */
  int32_t dtype;         /* the main input dtype */
  int32_t out_dtype;
  int32_t math_mode;     /* ops_math_mode */
  int32_t deterministic; /* the handle demands bitwise reproducibility */
  int32_t variant;       /* op-specific: activation, binary op, reduce op */
  uint32_t flags;        /* OPSI_F_* */
  int32_t align;         /* largest power of two (<= 16) dividing every data pointer in bytes */
  int64_t dims[8];       /* op-specific shape signature: the OPSI_DIM_* indices below */
  int64_t extra[2];      /* op-specific values that change the cost or the launch plan, not
                            eligibility (SDPA: window_left, window_right, -1 unbounded; GEMM:
                            extra[0] 1 where the Hopper rows store D by TMA) */
  int32_t sm_count;      /* the device's multiprocessors (grid sizing of split kernels); 0 on the CPU */
  int32_t page_size;     /* SDPA over a paged cache: keys a page; else 0 */
} opsi_problem;

/* Which dims[] entry holds what, per op. */
enum { OPSI_SDPA_B, OPSI_SDPA_SQ, OPSI_SDPA_SK, OPSI_SDPA_HQ, OPSI_SDPA_HKV, OPSI_SDPA_D, OPSI_SDPA_DV,
       OPSI_SDPA_TQ /* query rows of the whole call (varlen: the packed total; seqlen_q is their max) */ };
enum { OPSI_GEMM_BATCH, OPSI_GEMM_M, OPSI_GEMM_N, OPSI_GEMM_K };
enum { OPSI_ROWS_ROWS, OPSI_ROWS_COLS };          /* layernorm, rmsnorm, softmax */
enum { OPSI_EW_NUMEL, OPSI_EW_NDIM, OPSI_EW_INPUTS }; /* sin_affine, unary, binary */
enum { OPSI_REDUCE_OUT, OPSI_REDUCE_INNER, OPSI_REDUCE_NDIM };
/* rope (heads: q's and k's together) and kv_cache_append (heads: k's; heads_v, head_dim_v: v's;
 * rotary_dim 0 without RoPE) */
enum { OPSI_ROPE_TOKENS, OPSI_ROPE_HEADS, OPSI_ROPE_D, OPSI_ROPE_ROTARY, OPSI_ROPE_HEADS_V, OPSI_ROPE_DV };

typedef size_t (*opsi_workspace_fn)(const opsi_problem *problem);

#endif /* OPSLIB_CORE_PROBLEM_H_ */
