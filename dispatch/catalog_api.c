/* The public view of the capability rows (ops_kernel_info). */
#include <stdio.h>
#include <string.h>

#include "capabilities/rows.h"
#include "dispatch/rules.h"
#include "opslib/explain.h"
#include "runtime/error.h"

static const char *unit_name(int32_t unit) {
  static const char *const names[OPSI_UNIT_COUNT] = {"cpu", "ffma", "mma_f16", "mma_tf32", "wgmma_f16", "wgmma_tf32"};
  return unit >= 0 && unit < OPSI_UNIT_COUNT ? names[unit] : "unknown";
}

static void describe_limits(const opsi_kernel_row *r, char *buf, size_t n) {
  size_t used = (size_t)snprintf(buf, n, "align %d B", r->align);
  for (int i = 0; i < 8 && used < n; ++i) {
    if (r->dim_min[i] <= 0 && r->dim_max[i] <= 0 && r->dim_multiple[i] <= 1) continue;
    used += (size_t)snprintf(buf + used, n - used, "; %s", opsi_dim_name(r->op, i));
    if (r->dim_min[i] > 0 && used < n) used += (size_t)snprintf(buf + used, n - used, " >= %lld", (long long)r->dim_min[i]);
    if (r->dim_max[i] > 0 && used < n) used += (size_t)snprintf(buf + used, n - used, " <= %lld", (long long)r->dim_max[i]);
    if (r->dim_multiple[i] > 1 && used < n) {
      used += (size_t)snprintf(buf + used, n - used, " multiple of %lld", (long long)r->dim_multiple[i]);
    }
  }
  if (r->requires_tf32 && used < n) snprintf(buf + used, n - used, "; needs OPS_MATH_ALLOW_TF32");
}

/* Every role with its work when that fits in n bytes, else names and warps alone (the work
 * is whole through ops_kernel_role): never a cut label. */
static void describe_roles(const opsi_kernel_row *r, char *buf, size_t n) {
  for (int whole = 1; whole >= 0; --whole) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < OPSI_MAX_ROLES && r->roles[i].name != NULL && used < n; ++i) {
      const opsi_warp_role *w = &r->roles[i];
      used += whole ? (size_t)snprintf(buf + used, n - used, "%s%s x%d warps (%s)", i ? "; " : "", w->name,
                                       w->warps, w->work)
                    : (size_t)snprintf(buf + used, n - used, "%s%s x%d warps", i ? "; " : "", w->name, w->warps);
    }
    if (used == 0) {
      snprintf(buf, n, "none (host code)");
      return;
    }
    if (used < n) return;
  }
}

static int role_count(const opsi_kernel_row *r) {
  int k = 0;
  while (k < OPSI_MAX_ROLES && r->roles[k].name != NULL) ++k;
  return k;
}

int ops_kernel_role_count(const char *name) {
  const opsi_kernel_row *r = name != NULL ? opsi_row_named(name) : NULL;
  return r != NULL ? role_count(r) : -1;
}

ops_status ops_kernel_role(const char *name, int index, ops_warp_role *out) {
  opsi_clear_error();
  if (name == NULL) return opsi_fail(OPS_ERR_NULL_POINTER, "ops_kernel_role: name is NULL");
  if (out == NULL) return opsi_fail(OPS_ERR_NULL_POINTER, "ops_kernel_role: out is NULL");
  if (out->struct_size != sizeof(ops_warp_role)) {
    return opsi_fail(OPS_ERR_STRUCT_SIZE, "ops_kernel_role: out->struct_size: expected %zu, got %u",
                     sizeof(ops_warp_role), (unsigned)out->struct_size);
  }
  const opsi_kernel_row *r = opsi_row_named(name);
  if (r == NULL) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "ops_kernel_role: name: no kernel is named '%s' (opsctl list)", name);
  }
  const int count = role_count(r);
  if (count == 0) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "ops_kernel_role: index: %s is host code, with no warp roles", name);
  }
  if (index < 0 || index >= count) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "ops_kernel_role: index: expected 0 .. %d for %s, got %d", count - 1,
                     name, index);
  }
  out->warps = r->roles[index].warps;
  out->name = r->roles[index].name;
  out->work = r->roles[index].work;
  return OPS_OK;
}

static void fill(const opsi_kernel_row *r, ops_kernel_info *out) {
  const uint32_t size = out->struct_size;
  memset(out, 0, sizeof *out);
  out->struct_size = size;
  out->kernel_id = r->id;
  out->name = r->name;
  out->op = r->op;
  out->backend = r->backend;
  out->sm_min = r->sm_min;
  out->sm_max = r->sm_max;
  out->dtypes = r->dtypes;
  out->out_dtypes = r->out_dtypes;
  opsi_flag_names(r->flags, out->features, sizeof out->features);
  opsi_flag_names(r->fuses, out->fuses, sizeof out->fuses);
  describe_limits(r, out->limits, sizeof out->limits);
  describe_roles(r, out->roles, sizeof out->roles);
  out->stages = r->stages;
  out->smem_layout = r->smem_layout;
  out->smem_bytes = r->smem_bytes;
  out->threads = r->threads;
  out->deterministic = r->deterministic;
  out->reduction_order = r->reduction_order;
  out->workspace_formula = r->workspace_formula;
  out->unit = unit_name(r->unit);
  out->efficiency = r->efficiency;
  out->tests = r->tests;
  out->vector_bytes = r->vector_bytes;
  out->cluster_blocks = r->cluster > 1 ? r->cluster : 1;
}

static ops_status check_out(const char *fn, const ops_kernel_info *out) {
  if (out == NULL) return opsi_fail(OPS_ERR_NULL_POINTER, "%s: out is NULL", fn);
  if (out->struct_size != sizeof(ops_kernel_info)) {
    return opsi_fail(OPS_ERR_STRUCT_SIZE, "%s: out->struct_size: expected %zu, got %u", fn, sizeof(ops_kernel_info),
                     (unsigned)out->struct_size);
  }
  return OPS_OK;
}

int ops_kernel_count(void) {
  size_t n = 0;
  opsi_all_rows(&n);
  return (int)n;
}

ops_status ops_kernel_info_at(int index, ops_kernel_info *out) {
  opsi_clear_error();
  OPSI_TRY(check_out("ops_kernel_info_at", out));
  size_t n = 0;
  const opsi_kernel_row *const *rows = opsi_all_rows(&n);
  if (index < 0 || (size_t)index >= n) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "ops_kernel_info_at: index: expected 0..%d, got %d", (int)n - 1, index);
  }
  fill(rows[index], out);
  return OPS_OK;
}

ops_status ops_kernel_info_by_name(const char *name, ops_kernel_info *out) {
  opsi_clear_error();
  OPSI_TRY(check_out("ops_kernel_info_by_name", out));
  if (name == NULL) return opsi_fail(OPS_ERR_NULL_POINTER, "ops_kernel_info_by_name: name is NULL");
  const opsi_kernel_row *r = opsi_row_named(name);
  if (r != NULL) {
    fill(r, out);
    return OPS_OK;
  }
  return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "ops_kernel_info_by_name: name: expected a kernel of this build, got '%s'",
                   name);
}
