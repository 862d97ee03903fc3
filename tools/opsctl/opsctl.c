/*
 * opsctl: the kernel catalog, the dispatcher's choices and the fusion planner, from the
 * command line, for any target SM, with no GPU needed (a described-device handle).
 *
 *   opsctl list [--op sdpa] [--json]
 *   opsctl explain OP [--sm 90 | --cpu] [--dtype bf16] [shape options] [--json]
 *   opsctl fuse OP,OP,... [--sm 90 | --cpu] [--dtype bf16] [--m M --n N --k K] [--json]
 *   opsctl tune-cache FILE
 *   opsctl version
 *
 * Exit status: 0 success, 1 the library refused the call (its message is printed),
 * 2 a usage error.
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <opslib/opslib.h>

#define MAX_NODES 16

static const char *const k_usage =
    "usage:\n"
    "  opsctl list [--op OP] [--json]\n"
    "  opsctl explain OP [--sm SM | --cpu] [--dtype DT] [--tune-cache FILE] [--json] [shape options]\n"
    "      sdpa:       --q B,S,H,D --k B,S,Hkv,D [--dv Dv] [--causal] [--window L,R] [--lse]\n"
    "      sdpa_backward: as sdpa (dout like o, dq, dk, dv like q, k, v; the LSE always)\n"
    "      gemm:       --a [B,]M,K --b [B,]K,N [--out-dtype DT] [--bias] [--act FN] [--residual]\n"
    "      layernorm, rmsnorm, softmax:  --x ...,N [--residual]\n"
    "      unary:      --x SHAPE --fn FN       binary: --a SHAPE --b SHAPE --op add|sub|mul|div|max|min\n"
    "      scale, sin_affine:  --x SHAPE       reduce: --x SHAPE [--axes 0,2] [--keepdim] [--op sum|mean|max|min]\n"
    "      dropout, softmax_backward:  --x SHAPE\n"
    "      layernorm_backward, rmsnorm_backward:  --x ...,N [--dweight] [--dbias]\n"
    "      rope:       --q [B,]T,H,D [--k [B,]T,Hk,D] [--rotary R] [--gptj]   (int64 positions)\n"
    "      kv_cache_append:  --k T,Hkv,D [--dv Dv] --pages PAGES,PAGE_SIZE [--rope]\n"
    "  opsctl fuse NODE,NODE,... [--sm SM | --cpu] [--dtype DT] [--m M] [--n N] [--k K] [--json]\n"
    "      nodes: gemm bias add sub mul div max min scale mask softmax rmsnorm layernorm and\n"
    "             the functions relu gelu gelu_tanh gelu_erf silu sigmoid tanh exp neg abs sin\n"
    "  opsctl tune-cache FILE          the measured choices a tune cache file holds\n"
    "  opsctl version\n"
    "OP: sdpa gemm layernorm rmsnorm softmax sin_affine unary binary reduce scale dropout\n"
    "    layernorm_backward rmsnorm_backward softmax_backward rope kv_cache_append\n"
    "DT: f32 f16 bf16 (default bf16); SM: e.g. 80, 89, 90 (a described device); default --cpu\n";

static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "opsctl: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n%s", k_usage);
  va_end(ap);
  return 2;
}

static int library_error(const char *what, ops_status st) {
  fprintf(stderr, "opsctl: %s: %s: %s\n", what, ops_status_name(st), ops_last_error());
  return 1;
}

/* ---- options ------------------------------------------------------------------------ */

typedef struct {
  const char *name;
  const char *value; /* NULL for a flag that was given; "" absent */
  int given;
  int takes_value;
} option;

static option k_options[] = {
    {"--op", "", 0, 1},       {"--json", "", 0, 0},      {"--sm", "", 0, 1},       {"--cpu", "", 0, 0},
    {"--dtype", "", 0, 1},    {"--out-dtype", "", 0, 1}, {"--q", "", 0, 1},        {"--k", "", 0, 1},
    {"--dv", "", 0, 1},       {"--causal", "", 0, 0},    {"--window", "", 0, 1},   {"--lse", "", 0, 0},
    {"--a", "", 0, 1},        {"--b", "", 0, 1},         {"--bias", "", 0, 0},     {"--act", "", 0, 1},
    {"--residual", "", 0, 0}, {"--x", "", 0, 1},         {"--fn", "", 0, 1},       {"--axes", "", 0, 1},
    {"--keepdim", "", 0, 0},  {"--m", "", 0, 1},         {"--n", "", 0, 1},        {"--batch", "", 0, 1},
    {"--dweight", "", 0, 0},  {"--dbias", "", 0, 0},    {"--tune-cache", "", 0, 1}, {"--rotary", "", 0, 1},
    {"--gptj", "", 0, 0},     {"--pages", "", 0, 1},     {"--rope", "", 0, 0},
};
#define N_OPTIONS ((int)(sizeof k_options / sizeof k_options[0]))

static option *opt(const char *name) {
  for (int i = 0; i < N_OPTIONS; ++i) {
    if (strcmp(k_options[i].name, name) == 0) return &k_options[i];
  }
  return NULL;
}

static int has(const char *name) { return opt(name)->given; }
static const char *val(const char *name) { return opt(name)->value; }

/* Parses argv[first..]; positional arguments go to *pos (at most one). */
static int parse_options(int argc, char **argv, int first, const char **pos) {
  for (int i = first; i < argc; ++i) {
    if (strncmp(argv[i], "--", 2) != 0) {
      if (*pos != NULL) return usage_error("unexpected argument '%s'", argv[i]);
      *pos = argv[i];
      continue;
    }
    option *o = opt(argv[i]);
    if (o == NULL) return usage_error("unknown option '%s'", argv[i]);
    o->given = 1;
    if (o->takes_value) {
      if (i + 1 >= argc) return usage_error("option %s needs a value", argv[i]);
      o->value = argv[++i];
    }
  }
  return 0;
}

static int parse_dims(const char *option_name, int64_t *dims, int max) {
  const char *s = val(option_name);
  int n = 0;
  while (*s != '\0') {
    char *end;
    const long long v = strtoll(s, &end, 10);
    if (end == s || v < 0 || n == max || (*end != ',' && *end != '\0')) {
      return -usage_error("%s: expected up to %d non-negative integers separated by commas, got '%s'", option_name,
                          max, val(option_name));
    }
    dims[n++] = v;
    s = *end == ',' ? end + 1 : end;
  }
  if (n == 0) return -usage_error("%s: expected a shape such as 2,4096,16,128", option_name);
  return n;
}

static int64_t parse_int(const char *option_name, int64_t fallback) {
  if (!has(option_name)) return fallback;
  char *end;
  const long long v = strtoll(val(option_name), &end, 10);
  if (*end != '\0' || v < 0) return -1;
  return v;
}

static int dtype_by_name(const char *name) {
  for (int d = 1; d <= OPS_DTYPE_FP8_E5M2; ++d) {
    if (strcmp(ops_dtype_name((ops_dtype)d), name) == 0) return d;
  }
  return 0;
}

static int act_by_name(const char *name) {
  if (strcmp(name, "gelu") == 0) return OPS_ACT_GELU_TANH;
  for (int f = 0; f <= OPS_ACT_SIN; ++f) {
    if (strcmp(ops_act_name((ops_act)f), name) == 0) return f;
  }
  return -1;
}

static int binary_by_name(const char *name) {
  for (int b = 0; b <= OPS_BINARY_MIN; ++b) {
    if (strcmp(ops_binary_op_name((ops_binary_op)b), name) == 0) return b;
  }
  return -1;
}

/* ---- the target ------------------------------------------------------------------- */

static int make_handle(ops_handle *h, ops_device *dev) {
  if (has("--sm") && has("--cpu")) return usage_error("--sm and --cpu exclude each other");
  int sm = 0;
  if (has("--sm")) {
    sm = (int)parse_int("--sm", 0);
    if (sm < 50 || sm > 200) return usage_error("--sm: expected an SM version such as 80 or 90, got '%s'", val("--sm"));
  }
  ops_device_info info;
  ops_status st = ops_device_info_for_sm(sm, &info);
  if (st == OPS_OK) st = ops_handle_create_virtual(h, &info);
  if (st != OPS_OK) return library_error("creating the described device", st);
  /* measured choices written for this device (a described one reads its own file only) */
  if (has("--tune-cache") && (st = ops_handle_set_tune_cache(*h, val("--tune-cache"))) != OPS_OK) {
    return library_error("--tune-cache", st);
  }
  *dev = sm ? ops_device_cuda(0) : ops_device_cpu();
  return 0;
}

/* ---- tune-cache --------------------------------------------------------------------- */

/* The file's header and its measured choices, one a line: the shape bucket, the kernel kept
 * and every kernel timed. Whether a build and device accept it is what explain --tune-cache
 * (or ops_handle_set_tune_cache) says. */
static int cmd_tune_cache(const char *path) {
  if (path == NULL) return usage_error("tune-cache needs a file");
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "opsctl: tune-cache: cannot open %s\n", path);
    return 1;
  }
  static char line[8192];
  int entries = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    if (strncmp(line, "entry ", 6) != 0) {
      printf("%s\n", line);
      continue;
    }
    const char *bucket = strstr(line, " | ");
    char *save = NULL;
    strtok_r(line, " ", &save); /* "entry" */
    strtok_r(NULL, " ", &save); /* the key */
    const char *kept = strtok_r(NULL, " ", &save), *count = strtok_r(NULL, " ", &save);
    printf("  %s\n    kept %s; timed", bucket != NULL ? bucket + 3 : "?", kept ? kept : "?");
    for (int i = 0, n = count ? atoi(count) : 0; i < n; ++i) {
      const char *name = strtok_r(NULL, " ", &save), *us = strtok_r(NULL, " ", &save);
      printf("%s %s %s us", i ? "," : "", name ? name : "?", us ? us : "?");
    }
    printf("\n");
    ++entries;
  }
  fclose(f);
  printf("%d measured choice(s)\n", entries);
  return 0;
}

/* A descriptor with a distinct, never dereferenced address per tensor: the planner tells
 * tensors apart by their views, and nothing here runs. */
static ops_tensor desc(int32_t dtype, ops_device dev, int ndim, const int64_t *shape) {
  static uintptr_t next = 0x100000;
  ops_tensor t;
  next += 0x100000;
  ops_tensor_init(&t, (void *)next, (ops_dtype)dtype, dev, ndim, shape, NULL);
  return t;
}

/* ---- list ------------------------------------------------------------------------- */

static void json_string(const char *s) {
  putchar('"');
  for (; s != NULL && *s; ++s) {
    if (*s == '"' || *s == '\\') printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20) printf("\\u%04x", (unsigned char)*s);
    else putchar(*s);
  }
  putchar('"');
}

static void dtype_list(uint32_t mask, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (int d = 1; d < 32 && used < n; ++d) {
    if (mask & (1u << d)) used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? "," : "", ops_dtype_name((ops_dtype)d));
  }
}

static int cmd_list(void) {
  int op = 0;
  if (has("--op")) {
    op = ops_op_from_name(val("--op"));
    if (op == 0) return usage_error("--op: unknown op '%s'", val("--op"));
  }
  const int json = has("--json");
  int first = 1;
  if (json) printf("[");
  for (int i = 0; i < ops_kernel_count(); ++i) {
    ops_kernel_info k;
    k.struct_size = sizeof k;
    if (ops_kernel_info_at(i, &k) != OPS_OK) return library_error("reading the catalog", OPS_ERR_INTERNAL);
    if (op != 0 && k.op != op) continue;
    char dts[64], outs[64];
    dtype_list(k.dtypes, dts, sizeof dts);
    dtype_list(k.out_dtypes, outs, sizeof outs);
    const char *backend = k.backend == OPS_DEVICE_CUDA ? "cuda" : "cpu";
    if (json) {
      printf("%s{\"kernel_id\":%d,\"name\":", first ? "" : ",", k.kernel_id);
      json_string(k.name);
      printf(",\"op\":");
      json_string(ops_op_name((ops_op)k.op));
      printf(",\"backend\":\"%s\",\"sm_min\":%d,\"sm_max\":%d,\"dtypes\":\"%s\",\"out_dtypes\":\"%s\",\"features\":",
             backend, k.sm_min, k.sm_max, dts, outs);
      json_string(k.features);
      printf(",\"fuses\":");
      json_string(k.fuses);
      printf(",\"limits\":");
      json_string(k.limits);
      printf(",\"warp_roles\":");
      json_string(k.roles);
      printf(",\"roles\":[");
      for (int r = 0; r < ops_kernel_role_count(k.name); ++r) {
        ops_warp_role role;
        role.struct_size = sizeof role;
        if (ops_kernel_role(k.name, r, &role) != OPS_OK) break;
        printf("%s{\"name\":", r ? "," : "");
        json_string(role.name);
        printf(",\"warps\":%d,\"work\":", role.warps);
        json_string(role.work);
        printf("}");
      }
      printf("]");
      printf(",\"stages\":%d,\"cluster_blocks\":%d,\"smem_layout\":", k.stages, k.cluster_blocks);
      json_string(k.smem_layout);
      printf(",\"smem_bytes\":%d,\"threads\":%d,\"deterministic\":%s,\"reduction_order\":", k.smem_bytes, k.threads,
             k.deterministic ? "true" : "false");
      json_string(k.reduction_order);
      printf(",\"workspace\":");
      json_string(k.workspace_formula);
      printf(",\"unit\":\"%s\",\"efficiency\":%.3f,\"tests\":", k.unit, k.efficiency);
      json_string(k.tests);
      printf("}");
    } else {
      printf("%-5d %-22s %-10s %-4s", k.kernel_id, k.name, ops_op_name((ops_op)k.op), backend);
      if (k.backend == OPS_DEVICE_CUDA) printf(" sm_%d..sm_%d", k.sm_min, k.sm_max);
      printf("  in %s -> out %s\n", dts, outs);
      printf("      features: %s\n", k.features[0] ? k.features : "-");
      printf("      fuses: %s\n", k.fuses[0] ? k.fuses : "-");
      printf("      limits: %s\n", k.limits);
      printf("      stages %d; threads %d", k.stages, k.threads);
      if (k.cluster_blocks > 1) printf("; clusters of %d blocks sharing loads", k.cluster_blocks);
      printf("\n");
      if (ops_kernel_role_count(k.name) == 0) printf("      warp roles: none (host code)\n");
      for (int r = 0; r < ops_kernel_role_count(k.name); ++r) {
        ops_warp_role role;
        role.struct_size = sizeof role;
        if (ops_kernel_role(k.name, r, &role) != OPS_OK) break;
        printf("      %s x%d warps: %s\n", role.name, role.warps, role.work);
      }
      printf("      smem: %s (%d bytes)\n", k.smem_layout, k.smem_bytes);
      printf("      reduction order: %s%s\n", k.reduction_order, k.deterministic ? " (deterministic)" : "");
      printf("      workspace: %s; cost: %s at %.0f%% of peak\n", k.workspace_formula, k.unit, 100.0 * k.efficiency);
      printf("      tested by: %s\n", k.tests);
    }
    first = 0;
  }
  if (json) printf("]\n");
  return 0;
}

/* ---- explain ---------------------------------------------------------------------- */

static int print_explain(const ops_explain *e) {
  static char buf[1 << 16];
  if (has("--json")) {
    ops_explain_to_json(e, buf, sizeof buf);
    printf("%s\n", buf);
  } else {
    ops_explain_to_text(e, buf, sizeof buf);
    printf("%s", buf);
  }
  return 0;
}

static int need(const char *option_name, const char *op) {
  if (!has(option_name)) return usage_error("explain %s needs %s", op, option_name);
  return 0;
}

/* One op call as the command line describes it: operand descriptors (no data) in the op's
 * argument order, and its parameters (whose optional operands point into t). Parsed first,
 * then explained on a handle, then rendered. */
typedef struct explain_call {
  int op;
  ops_tensor t[8];
  int with_lse; /* sdpa: t[4] is LSE */
  ops_sdpa_params sdpa;
  ops_gemm_params gemm;
  ops_norm_params norm;
  ops_unary_params unary;
  ops_binary_params binary;
  ops_dropout_params dropout;
  ops_norm_backward_params norm_bwd;
  ops_reduce_params reduce;
  ops_rope_params rope;
  ops_kv_cache_append_params append;
} explain_call;

static int parse_sdpa(const char *op_name, int dt, ops_device dev, explain_call *c) {
  int rc;
  int64_t d1[8], d2[8];
  if ((rc = need("--q", op_name)) || (rc = need("--k", op_name))) return rc;
  const int n1 = parse_dims("--q", d1, 4), n2 = parse_dims("--k", d2, 4);
  if (n1 < 0 || n2 < 0) return 2;
  if (n1 != 4 || n2 != 4) return usage_error("--q and --k: expected 4 extents each (B,S,H,D)");
  int64_t vs[4] = {d2[0], d2[1], d2[2], d2[3]}, os[4] = {d1[0], d1[1], d1[2], d1[3]};
  if (has("--dv")) vs[3] = os[3] = parse_int("--dv", d2[3]);
  const int64_t ls[3] = {d1[0], d1[2], d1[1]};
  c->t[0] = desc(dt, dev, 4, d1), c->t[1] = desc(dt, dev, 4, d2), c->t[2] = desc(dt, dev, 4, vs);
  c->t[3] = desc(dt, dev, 4, os), c->t[4] = desc(OPS_DTYPE_F32, dev, 3, ls);
  c->with_lse = has("--lse");
  ops_sdpa_params_init(&c->sdpa);
  c->sdpa.causal = has("--causal");
  if (has("--window")) {
    int64_t w[2];
    if (parse_dims("--window", w, 2) != 2) return usage_error("--window: expected LEFT,RIGHT");
    c->sdpa.window_left = (int32_t)w[0], c->sdpa.window_right = (int32_t)w[1];
  }
  return 0;
}

static int parse_gemm(const char *op_name, int dt, ops_device dev, explain_call *c) {
  int rc;
  int64_t d1[8], d2[8];
  if ((rc = need("--a", op_name)) || (rc = need("--b", op_name))) return rc;
  const int n1 = parse_dims("--a", d1, 3), n2 = parse_dims("--b", d2, 3);
  if (n1 < 0 || n2 < 0) return 2;
  if (n1 < 2 || n2 < 2) return usage_error("--a and --b: expected [B,]M,K and [B,]K,N");
  const int odt = has("--out-dtype") ? dtype_by_name(val("--out-dtype")) : dt;
  if (odt == 0) return usage_error("--out-dtype: expected f32, f16 or bf16");
  int64_t ds[3];
  const int batched = n1 == 3 || n2 == 3;
  if (batched) ds[0] = n1 == 3 ? d1[0] : d2[0];
  ds[batched] = d1[n1 - 2], ds[batched + 1] = d2[n2 - 1];
  const int64_t bias_shape[1] = {d2[n2 - 1]};
  c->t[0] = desc(dt, dev, n1, d1), c->t[1] = desc(dt, dev, n2, d2), c->t[2] = desc(odt, dev, 2 + batched, ds);
  c->t[3] = desc(odt, dev, 1, bias_shape), c->t[4] = desc(odt, dev, 2 + batched, ds);
  ops_gemm_params_init(&c->gemm);
  if (has("--bias")) c->gemm.bias = &c->t[3];
  if (has("--residual")) c->gemm.residual = &c->t[4];
  if (has("--act") && (c->gemm.activation = act_by_name(val("--act"))) < 0) {
    return usage_error("--act: unknown function '%s'", val("--act"));
  }
  return 0;
}

/* --x alone: the row ops, the pointwise ops, dropout and the backward ops */
static int parse_x(const char *op_name, int dt, ops_device dev, explain_call *c) {
  int rc;
  int64_t d[8];
  if ((rc = need("--x", op_name))) return rc;
  const int n = parse_dims("--x", d, 8);
  if (n < 0) return 2; /* parse_dims gives at least one extent */
  const int64_t ws[1] = {d[n - 1]};
  for (int i = 0; i < 3; ++i) c->t[i] = desc(dt, dev, n, d); /* x, y (dy, x, dx), in that order */
  switch (c->op) {
    case OPS_OP_LAYERNORM:
    case OPS_OP_RMSNORM:
      c->t[3] = desc(dt, dev, 1, ws), c->t[4] = desc(dt, dev, n, d), c->t[5] = desc(dt, dev, n, d);
      ops_norm_params_init(&c->norm);
      if (has("--residual")) c->norm.residual = &c->t[4], c->norm.residual_out = &c->t[5];
      break;
    case OPS_OP_UNARY:
      ops_unary_params_init(&c->unary);
      if (has("--fn") && (c->unary.fn = act_by_name(val("--fn"))) < 0) {
        return usage_error("--fn: unknown function '%s'", val("--fn"));
      }
      break;
    case OPS_OP_DROPOUT:
      ops_dropout_params_init(&c->dropout);
      c->dropout.p = 0.1f;
      break;
    case OPS_OP_LAYERNORM_BACKWARD:
    case OPS_OP_RMSNORM_BACKWARD:
      c->t[3] = desc(dt, dev, 1, ws);                       /* weight */
      c->t[4] = desc(OPS_DTYPE_F32, dev, n - 1, d);         /* mean, rstd: x's shape without the last axis */
      c->t[5] = desc(OPS_DTYPE_F32, dev, 1, ws);            /* dweight */
      c->t[6] = desc(OPS_DTYPE_F32, dev, 1, ws);            /* dbias */
      ops_norm_backward_params_init(&c->norm_bwd);
      if (has("--dweight")) c->norm_bwd.dweight = &c->t[5];
      if (has("--dbias")) c->norm_bwd.dbias = &c->t[6];
      break;
    default:
      break;
  }
  return 0;
}

static int parse_binary(const char *op_name, int dt, ops_device dev, explain_call *c) {
  int rc;
  int64_t d1[8], d2[8];
  if ((rc = need("--a", op_name)) || (rc = need("--b", op_name))) return rc;
  const int n1 = parse_dims("--a", d1, 8), n2 = parse_dims("--b", d2, 8);
  if (n1 < 0 || n2 < 0) return 2;
  /* y takes the broadcast shape of a and b (NumPy rules, aligned right) */
  const int ny = n1 > n2 ? n1 : n2;
  int64_t ys[8];
  for (int i = 0; i < ny; ++i) {
    const int64_t ea = i - (ny - n1) >= 0 ? d1[i - (ny - n1)] : 1, eb = i - (ny - n2) >= 0 ? d2[i - (ny - n2)] : 1;
    if (ea != eb && ea != 1 && eb != 1) return usage_error("--a and --b: shapes that do not broadcast");
    ys[i] = ea == 1 ? eb : ea;
  }
  c->t[0] = desc(dt, dev, n1, d1), c->t[1] = desc(dt, dev, n2, d2), c->t[2] = desc(dt, dev, ny, ys);
  ops_binary_params_init(&c->binary);
  if (has("--op") && (c->binary.op = binary_by_name(val("--op"))) < 0) {
    return usage_error("--op: unknown binary op '%s'", val("--op"));
  }
  return 0;
}

static int parse_reduce(const char *op_name, int dt, ops_device dev, explain_call *c) {
  int rc;
  int64_t d[8];
  if ((rc = need("--x", op_name))) return rc;
  const int n = parse_dims("--x", d, 8);
  if (n < 0) return 2;
  ops_reduce_params *p = &c->reduce;
  ops_reduce_params_init(p);
  if (has("--op")) {
    static const char *const names[] = {"sum", "mean", "max", "min"};
    p->op = -1;
    for (int i = 0; i < 4; ++i) {
      if (strcmp(val("--op"), names[i]) == 0) p->op = i;
    }
    if (p->op < 0) return usage_error("--op: expected sum, mean, max or min, got '%s'", val("--op"));
  }
  if (has("--axes")) {
    int64_t ax[8];
    const int na = parse_dims("--axes", ax, 8);
    if (na < 0) return 2;
    p->axes = 0;
    for (int i = 0; i < na; ++i) p->axes |= ax[i] < 32 ? 1u << ax[i] : 0x80000000u;
  }
  p->keepdim = has("--keepdim");
  int64_t ys[8];
  int yn = 0;
  for (int i = 0; i < n; ++i) {
    if (p->axes == OPS_REDUCE_ALL_AXES || (p->axes & (1u << i))) {
      if (p->keepdim) ys[yn++] = 1;
    } else {
      ys[yn++] = d[i];
    }
  }
  c->t[0] = desc(dt, dev, n, d), c->t[1] = desc(dt, dev, yn, ys);
  return 0;
}

/* rope: t[0] positions (int64, q's leading axes), t[1] q = t[2] q_out, t[3] k = t[4] k_out */
static int parse_rope(const char *op_name, int dt, ops_device dev, explain_call *c) {
  int rc;
  int64_t dq[8], dk[8];
  if ((rc = need("--q", op_name))) return rc;
  const int nq = parse_dims("--q", dq, 4);
  if (nq < 0) return 2;
  if (nq < 3) return usage_error("--q: expected [B,]T,H,D");
  c->t[0] = desc(OPS_DTYPE_I64, dev, nq - 2, dq);
  c->t[1] = c->t[2] = desc(dt, dev, nq, dq);
  ops_rope_params_init(&c->rope);
  if (has("--k")) {
    const int nk = parse_dims("--k", dk, 4);
    if (nk < 0) return 2;
    c->t[3] = c->t[4] = desc(dt, dev, nk, dk);
    c->rope.k = &c->t[3], c->rope.k_out = &c->t[4];
  }
  if (has("--rotary") && (c->rope.rotary_dim = (int32_t)parse_int("--rotary", 0)) < 0) {
    return usage_error("--rotary: expected a non-negative integer");
  }
  if (has("--gptj")) c->rope.style = OPS_ROPE_GPTJ;
  return 0;
}

/* kv_cache_append: t[0] k, t[1] v, t[2] slot_mapping (int64), t[3] k_cache, t[4] v_cache,
 * t[5] positions */
static int parse_append(const char *op_name, int dt, ops_device dev, explain_call *c) {
  int rc;
  int64_t dk[8], pg[2];
  if ((rc = need("--k", op_name)) || (rc = need("--pages", op_name))) return rc;
  const int nk = parse_dims("--k", dk, 3);
  if (nk < 0) return 2;
  if (nk != 3) return usage_error("--k: expected T,Hkv,D");
  if (parse_dims("--pages", pg, 2) != 2) return usage_error("--pages: expected PAGES,PAGE_SIZE");
  const int64_t dv = has("--dv") ? parse_int("--dv", dk[2]) : dk[2];
  const int64_t vs[3] = {dk[0], dk[1], dv}, kcs[4] = {pg[0], pg[1], dk[1], dk[2]}, vcs[4] = {pg[0], pg[1], dk[1], dv};
  c->t[0] = desc(dt, dev, 3, dk), c->t[1] = desc(dt, dev, 3, vs), c->t[2] = desc(OPS_DTYPE_I64, dev, 1, dk);
  c->t[3] = desc(dt, dev, 4, kcs), c->t[4] = desc(dt, dev, 4, vcs), c->t[5] = desc(OPS_DTYPE_I64, dev, 1, dk);
  ops_kv_cache_append_params_init(&c->append);
  ops_rope_params_init(&c->rope);
  if (has("--rope")) c->append.rope = &c->rope, c->append.positions = &c->t[5];
  if (has("--gptj")) c->rope.style = OPS_ROPE_GPTJ;
  return 0;
}

/* The command line of `explain OP` into c; 0, or the exit code of a usage error. */
static int parse_explain_call(const char *op_name, int dt, ops_device dev, explain_call *c) {
  memset(c, 0, sizeof *c);
  c->op = ops_op_from_name(op_name);
  switch (c->op) {
    case OPS_OP_SDPA:
    case OPS_OP_SDPA_BACKWARD: return parse_sdpa(op_name, dt, dev, c);
    case OPS_OP_GEMM: return parse_gemm(op_name, dt, dev, c);
    case OPS_OP_BINARY: return parse_binary(op_name, dt, dev, c);
    case OPS_OP_REDUCE: return parse_reduce(op_name, dt, dev, c);
    case OPS_OP_ROPE: return parse_rope(op_name, dt, dev, c);
    case OPS_OP_KV_CACHE_APPEND: return parse_append(op_name, dt, dev, c);
    case OPS_OP_LAYERNORM:
    case OPS_OP_RMSNORM:
    case OPS_OP_SOFTMAX:
    case OPS_OP_UNARY:
    case OPS_OP_SCALE:
    case OPS_OP_SIN_AFFINE:
    case OPS_OP_DROPOUT:
    case OPS_OP_SOFTMAX_BACKWARD:
    case OPS_OP_LAYERNORM_BACKWARD:
    case OPS_OP_RMSNORM_BACKWARD: return parse_x(op_name, dt, dev, c);
    default: return usage_error("explain: op '%s' has no command-line form yet", op_name);
  }
}

/* The op's _explain on h. */
static ops_status explain_call_run(ops_handle h, explain_call *c, ops_explain *e) {
  ops_tensor *t = c->t;
  switch (c->op) {
    case OPS_OP_SDPA: return ops_sdpa_explain(h, &c->sdpa, &t[0], &t[1], &t[2], &t[3], c->with_lse ? &t[4] : NULL, e);
    case OPS_OP_SDPA_BACKWARD: /* dout like o, the gradients like q, k, v; the LSE always */
      return ops_sdpa_backward_explain(h, &c->sdpa, &t[0], &t[1], &t[2], &t[3], &t[4], &t[3], &t[0], &t[1], &t[2], e);
    case OPS_OP_GEMM: return ops_gemm_explain(h, &c->gemm, &t[0], &t[1], &t[2], e);
    case OPS_OP_LAYERNORM: return ops_layernorm_explain(h, &c->norm, &t[0], &t[3], &t[1], e);
    case OPS_OP_RMSNORM: return ops_rmsnorm_explain(h, &c->norm, &t[0], &t[3], &t[1], e);
    case OPS_OP_SOFTMAX: return ops_softmax_explain(h, NULL, &t[0], &t[1], e);
    case OPS_OP_UNARY: return ops_unary_explain(h, &c->unary, &t[0], &t[1], e);
    case OPS_OP_SCALE: return ops_scale_explain(h, NULL, &t[0], &t[1], e);
    case OPS_OP_SIN_AFFINE: return ops_sin_affine_explain(h, NULL, &t[0], &t[1], e);
    case OPS_OP_BINARY: return ops_binary_explain(h, &c->binary, &t[0], &t[1], &t[2], e);
    case OPS_OP_DROPOUT: return ops_dropout_explain(h, &c->dropout, &t[0], &t[1], e);
    case OPS_OP_SOFTMAX_BACKWARD: return ops_softmax_backward_explain(h, NULL, &t[0], &t[1], &t[2], e);
    case OPS_OP_LAYERNORM_BACKWARD:
      return ops_layernorm_backward_explain(h, &c->norm_bwd, &t[0], &t[1], &t[3], &t[4], &t[4], &t[2], e);
    case OPS_OP_RMSNORM_BACKWARD:
      return ops_rmsnorm_backward_explain(h, &c->norm_bwd, &t[0], &t[1], &t[3], &t[4], &t[2], e);
    case OPS_OP_REDUCE: return ops_reduce_explain(h, &c->reduce, &t[0], &t[1], e);
    case OPS_OP_ROPE: return ops_rope_explain(h, &c->rope, &t[0], &t[1], &t[2], e);
    case OPS_OP_KV_CACHE_APPEND: return ops_kv_cache_append_explain(h, &c->append, &t[0], &t[1], &t[2], &t[3], &t[4], e);
    default: return OPS_ERR_INVALID_ARGUMENT;
  }
}

static int cmd_explain(const char *op_name) {
  if (op_name == NULL) return usage_error("explain needs an op");
  const int op = ops_op_from_name(op_name);
  if (op == 0 || op == OPS_OP_EW_CHAIN) return usage_error("explain: unknown op '%s'", op_name);
  const int dt = dtype_by_name(has("--dtype") ? val("--dtype") : "bf16");
  if (dt == 0) return usage_error("--dtype: expected f32, f16 or bf16, got '%s'", val("--dtype"));
  ops_handle h = NULL;
  ops_device dev;
  int rc = make_handle(&h, &dev);
  if (rc != 0) return rc;
  static explain_call c; /* large; the parameters point into it */
  rc = parse_explain_call(op_name, dt, dev, &c);
  if (rc == 0) {
    ops_explain e;
    e.struct_size = sizeof e;
    const ops_status st = explain_call_run(h, &c, &e);
    rc = st != OPS_OK ? library_error("explain", st) : print_explain(&e);
  }
  ops_handle_destroy(h);
  return rc;
}

/* ---- fuse ------------------------------------------------------------------------- */

typedef struct {
  ops_node nodes[MAX_NODES];
  ops_tensor t[4 * MAX_NODES];
  int nt;
  ops_unary_params unary[MAX_NODES];
  ops_binary_params binary[MAX_NODES];
  ops_scale_params scale[MAX_NODES];
} chain;

static ops_tensor *add_tensor(chain *c, ops_tensor t) {
  c->t[c->nt] = t;
  return &c->t[c->nt++];
}

static int cmd_fuse(const char *spec) {
  if (spec == NULL) return usage_error("fuse needs a chain such as gemm,bias,gelu");
  const int dt = dtype_by_name(has("--dtype") ? val("--dtype") : "bf16");
  if (dt == 0) return usage_error("--dtype: expected f32, f16 or bf16, got '%s'", val("--dtype"));
  const int64_t m = parse_int("--m", 4096), n = parse_int("--n", 4096), k = parse_int("--k", 4096);
  const int64_t batch = parse_int("--batch", 1);
  if (m < 1 || n < 1 || k < 1 || batch < 1) return usage_error("--m, --n, --k, --batch: expected positive integers");
  ops_handle h = NULL;
  ops_device dev;
  int rc = make_handle(&h, &dev);
  if (rc != 0) return rc;
  static chain c;
  memset(&c, 0, sizeof c);
  /* The current tensor flows through the chain: [batch,] rows x cols. */
  int64_t rows = m, cols = n, shape[3];
  int count = 0, gemms = 0;
  ops_tensor *cur = NULL;
  char names[512];
  snprintf(names, sizeof names, "%s", spec);
  for (char *save = NULL, *tok = strtok_r(names, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    if (count == MAX_NODES) return usage_error("fuse: at most %d nodes", MAX_NODES);
    ops_node *node = &c.nodes[count];
    ops_node_init(node);
    const int nd = batch > 1 ? 3 : 2;
#define SHAPE(r, cc) (shape[0] = batch, shape[nd - 2] = (r), shape[nd - 1] = (cc), shape)
    if (cur == NULL && strcmp(tok, "gemm") != 0) cur = add_tensor(&c, desc(dt, dev, nd, SHAPE(rows, cols)));
    const int act = act_by_name(tok), bin = binary_by_name(tok);
    if (strcmp(tok, "gemm") == 0) {
      node->op = OPS_OP_GEMM;
      if (cur == NULL) { /* the first GEMM: [M, K] x [K, N] */
        node->in[0] = add_tensor(&c, desc(dt, dev, nd, SHAPE(m, k)));
        node->in[1] = add_tensor(&c, desc(dt, dev, nd, SHAPE(k, n)));
      } else { /* a later one: the current tensor times [cols, K] */
        node->in[0] = cur;
        node->in[1] = add_tensor(&c, desc(dt, dev, nd, SHAPE(cols, k)));
        cols = k;
      }
      if (gemms++ == 0 && strstr(spec, "softmax") != NULL) { /* attention: Q [M, K] x K^T [K, N] */
        cols = n;
      }
    } else if (strcmp(tok, "bias") == 0) {
      const int64_t vs[1] = {cols};
      node->op = OPS_OP_BINARY, node->in[0] = cur, node->in[1] = add_tensor(&c, desc(dt, dev, 1, vs));
    } else if (strcmp(tok, "mask") == 0) {
      const int64_t ms[2] = {rows, cols};
      node->op = OPS_OP_BINARY, node->in[0] = cur, node->in[1] = add_tensor(&c, desc(dt, dev, 2, ms));
    } else if (bin >= 0) {
      ops_binary_params_init(&c.binary[count]);
      c.binary[count].op = bin;
      node->op = OPS_OP_BINARY, node->params = &c.binary[count];
      node->in[0] = cur, node->in[1] = add_tensor(&c, desc(dt, dev, nd, SHAPE(rows, cols)));
    } else if (strcmp(tok, "scale") == 0) {
      ops_scale_params_init(&c.scale[count]);
      c.scale[count].alpha = 0.125f;
      node->op = OPS_OP_SCALE, node->params = &c.scale[count], node->in[0] = cur;
    } else if (strcmp(tok, "softmax") == 0) {
      node->op = OPS_OP_SOFTMAX, node->in[0] = cur;
    } else if (strcmp(tok, "rmsnorm") == 0 || strcmp(tok, "layernorm") == 0) {
      const int64_t ws[1] = {cols};
      node->op = tok[0] == 'r' ? OPS_OP_RMSNORM : OPS_OP_LAYERNORM;
      node->in[0] = cur, node->in[1] = add_tensor(&c, desc(dt, dev, 1, ws));
    } else if (act >= 0) {
      ops_unary_params_init(&c.unary[count]);
      c.unary[count].fn = act;
      node->op = OPS_OP_UNARY, node->params = &c.unary[count], node->in[0] = cur;
    } else {
      ops_handle_destroy(h);
      return usage_error("fuse: unknown node '%s'", tok);
    }
    cur = add_tensor(&c, desc(dt, dev, nd, SHAPE(rows, cols)));
    node->out = cur;
    ++count;
#undef SHAPE
  }
  /* Attention's first GEMM reads K^T: a [K, N] view of a [N, K] tensor. */
  if (gemms == 2 && strstr(spec, "softmax") != NULL) {
    ops_tensor *kt = (ops_tensor *)c.nodes[0].in[1];
    const int nd = kt->ndim;
    const int64_t ks[3] = {batch, n, k};
    ops_tensor kk = desc(dt, dev, nd, ks + (nd == 2));
    int perm[3] = {0, 1, 2};
    perm[nd - 2] = nd - 1, perm[nd - 1] = nd - 2;
    ops_tensor_permute(&kk, perm, kt);
  }
  ops_plan plan = NULL;
  const ops_status st = ops_fuse(h, c.nodes, count, 0, &plan);
  if (st != OPS_OK) {
    ops_handle_destroy(h);
    return library_error("fuse", st);
  }
  static char buf[1 << 16];
  if (has("--json")) {
    ops_plan_to_json(plan, buf, sizeof buf);
    printf("%s\n", buf);
  } else {
    ops_plan_to_text(plan, buf, sizeof buf);
    printf("%s", buf);
  }
  ops_plan_destroy(plan);
  ops_handle_destroy(h);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage_error("a command is needed");
  const char *cmd = argv[1];
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    printf("%s", k_usage);
    return 0;
  }
  if (strcmp(cmd, "version") == 0) {
    printf("opsctl %s (opslib %s, %d kernels)\n", OPS_VERSION_STRING, ops_version_string(), ops_kernel_count());
    return 0;
  }
  const char *pos = NULL;
  const int rc = parse_options(argc, argv, 2, &pos);
  if (rc != 0) return rc;
  if (strcmp(cmd, "list") == 0) {
    if (pos != NULL) return usage_error("list takes no argument (got '%s'); use --op", pos);
    return cmd_list();
  }
  if (strcmp(cmd, "explain") == 0) return cmd_explain(pos);
  if (strcmp(cmd, "fuse") == 0) return cmd_fuse(pos);
  if (strcmp(cmd, "tune-cache") == 0) return cmd_tune_cache(pos);
  return usage_error("unknown command '%s'", cmd);
}
