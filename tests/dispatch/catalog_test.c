/*
 * The capability tables are consistent: unique ids and names, ids that encode their op,
 * a CPU reference for every op, shared memory within the limit of every SM family in a
 * CUDA row's range, warp roles that add up to the block, and the metadata explain prints.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "capabilities/machines.h"
#include "capabilities/rows.h"
#include "opslib/opslib.h"
#include "tests/support/opst.h"

static void rows_are_consistent(void **state) {
  (void)state;
  size_t n = 0;
  const opsi_kernel_row *const *rows = opsi_all_rows(&n);
  assert_true(n >= 11);
  assert_int_equal((int)n, ops_kernel_count());
  int machines_n = 0;
  const opsi_machine *machines = opsi_machines(&machines_n);
  for (size_t i = 0; i < n; ++i) {
    const opsi_kernel_row *r = rows[i];
    for (size_t j = 0; j < i; ++j) {
      if (rows[j]->id == r->id || strcmp(rows[j]->name, r->name) == 0) {
        print_error("rows %s and %s share an id or a name\n", rows[j]->name, r->name);
        fail();
      }
    }
    assert_int_equal(r->id / 100, r->op); /* ids are op * 100 + n */
    assert_true(strlen(r->name) > 0 && strlen(r->name) < 64);
    assert_non_null(r->launch);
    assert_true(r->dtypes != 0 && r->out_dtypes != 0);
    assert_true(r->align >= 1 && (r->align & (r->align - 1)) == 0);
    assert_non_null(r->reduction_order);
    assert_non_null(r->workspace_formula);
    assert_non_null(r->smem_layout);
    assert_true(r->tests != NULL && strncmp(r->tests, "//tests/", 8) == 0);
    assert_true(r->efficiency > 0.0f && r->efficiency <= 1.0f);
    if (r->backend == OPS_DEVICE_CPU) {
      assert_int_equal(r->threads, 0);
      assert_int_equal(r->smem_bytes, 0);
      continue;
    }
    assert_int_equal(r->backend, OPS_DEVICE_CUDA);
    assert_true(r->sm_min >= 80 && r->sm_min <= r->sm_max);
    int warps = 0;
    for (int k = 0; k < OPSI_MAX_ROLES && r->roles[k].name != NULL; ++k) warps += r->roles[k].warps;
    assert_int_equal(warps * 32, r->threads);
    for (int m = 0; m < machines_n; ++m) {
      const opsi_machine *f = &machines[m];
      if (f->backend != OPS_DEVICE_CUDA || f->sm_max < r->sm_min || f->sm_min > r->sm_max) continue;
      if (r->smem_bytes > f->smem_per_block_optin) {
        print_error("%s needs %d B of shared memory; %s allows %lld\n", r->name, r->smem_bytes, f->name,
                    (long long)f->smem_per_block_optin);
        fail();
      }
    }
  }
}

static void every_op_has_a_cpu_reference(void **state) {
  (void)state;
  for (int op = 1; op <= ops_op_count(); ++op) {
    size_t n = 0;
    const opsi_kernel_row *rows = opsi_rows_for_op(op, &n);
    int cpu = 0; /* CPU rows named *_ref: the reference; other CPU kernels may sit beside it */
    for (size_t i = 0; i < n; ++i) {
      const size_t len = strlen(rows[i].name);
      cpu += rows[i].backend == OPS_DEVICE_CPU && len > 4 && strcmp(rows[i].name + len - 4, "_ref") == 0;
    }
    if (cpu != 1) {
      print_error("op %s has %d CPU reference rows\n", ops_op_name((ops_op)op), cpu);
      fail();
    }
    assert_int_equal(ops_op_from_name(ops_op_name((ops_op)op)), op);
  }
  assert_string_equal(ops_op_name((ops_op)0), "unknown");
  assert_int_equal(ops_op_from_name("no_such_op"), 0);
  size_t n = 7;
  assert_null(opsi_rows_for_op(999, &n));
  assert_int_equal(n, 0);
}

/* Every role's label is short and comes back whole through ops_kernel_role; the roles summary
 * of ops_kernel_info holds each label whole or none of them (names and warps), never a cut. */
static void warp_roles_are_whole(void **state) {
  (void)state;
  for (int i = 0; i < ops_kernel_count(); ++i) {
    ops_kernel_info k;
    k.struct_size = sizeof k;
    OPST_OK(ops_kernel_info_at(i, &k));
    const int n = ops_kernel_role_count(k.name);
    const opsi_kernel_row *r = opsi_row_named(k.name);
    assert_non_null(r);
    int warps = 0;
    for (int j = 0; j < n; ++j) {
      ops_warp_role role;
      role.struct_size = sizeof role;
      OPST_OK(ops_kernel_role(k.name, j, &role));
      assert_string_equal(role.name, r->roles[j].name);
      assert_string_equal(role.work, r->roles[j].work);
      if (strlen(role.work) > 100) fail_msg("%s: role %s: a label of %zu characters", k.name, role.name, strlen(role.work));
      warps += role.warps;
      assert_non_null(strstr(k.roles, role.name));
    }
    if (n > 0 && r->threads > 0) assert_int_equal(warps * 32, r->threads);
    if (n > 0 && strchr(k.roles, '(') != NULL) { /* the labels are there: all of them, whole */
      for (int j = 0; j < n; ++j) assert_non_null(strstr(k.roles, r->roles[j].work));
    }
    ops_warp_role role;
    role.struct_size = sizeof role;
    assert_int_equal(ops_kernel_role(k.name, n, &role), OPS_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ops_last_error(), "index"));
  }
  ops_warp_role role;
  role.struct_size = sizeof role;
  assert_int_equal(ops_kernel_role_count("nope"), -1);
  assert_int_equal(ops_kernel_role("nope", 0, &role), OPS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(ops_last_error(), "nope"));
  assert_int_equal(ops_kernel_role(NULL, 0, &role), OPS_ERR_NULL_POINTER);
  assert_int_equal(ops_kernel_role("cuda_sdpa_sm90_d128", 0, NULL), OPS_ERR_NULL_POINTER);
  role.struct_size = 3;
  assert_int_equal(ops_kernel_role("cuda_sdpa_sm90_d128", 0, &role), OPS_ERR_STRUCT_SIZE);
  role.struct_size = sizeof role;
  OPST_OK(ops_kernel_role("cuda_sdpa_sm90_d128", 1, &role));
  assert_string_equal(role.name, "consumers");
  assert_int_equal(role.warps, 8);
}

static void public_catalog_matches_the_rows(void **state) {
  (void)state;
  ops_kernel_info info;
  info.struct_size = sizeof info;
  OPST_OK(ops_kernel_info_by_name("cpu_sdpa_ref", &info));
  assert_int_equal(info.kernel_id, 100);
  assert_int_equal(info.op, OPS_OP_SDPA);
  assert_string_equal(info.features, "causal, window, gqa, varlen, lse, mask, strided, dv_ne_d, kv_cache, paged");
  assert_string_equal(info.unit, "cpu");
  assert_string_equal(info.roles, "none (host code)");
  assert_non_null(strstr(info.workspace_formula, "max_seqlen_k"));
  /* the first row that rounds f32 to tf32: its unit and its math-mode requirement are public */
  OPST_OK(ops_kernel_info_by_name("cuda_gemm_tf32", &info));
  assert_string_equal(info.unit, "mma_tf32");
  assert_non_null(strstr(info.limits, "align 16 B"));
  assert_non_null(strstr(info.limits, "needs OPS_MATH_ALLOW_TF32"));
  OPST_OK(ops_kernel_info_by_name("cuda_gemm_mma_cp", &info));
  assert_null(strstr(info.limits, "tf32"));
  for (int i = 0; i < ops_kernel_count(); ++i) {
    ops_kernel_info k;
    k.struct_size = sizeof k;
    OPST_OK(ops_kernel_info_at(i, &k));
    ops_kernel_info again;
    again.struct_size = sizeof again;
    OPST_OK(ops_kernel_info_by_name(k.name, &again));
    assert_int_equal(again.kernel_id, k.kernel_id);
  }
  assert_int_equal(ops_kernel_info_at(ops_kernel_count(), &info), OPS_ERR_INVALID_ARGUMENT);
  assert_int_equal(ops_kernel_info_by_name("nope", &info), OPS_ERR_INVALID_ARGUMENT);
  info.struct_size = 1;
  assert_int_equal(ops_kernel_info_at(0, &info), OPS_ERR_STRUCT_SIZE);
}

/* Kernel ids are ABI: once shipped, a name keeps its id and an id its name. Every kernel
 * shipped so far, by name; a new kernel is appended here with the id it ships with. */
static void shipped_kernel_ids_never_change(void **state) {
  (void)state;
  static const struct {
    int32_t id;
    const char *name;
  } shipped[] = {
      {100, "cpu_sdpa_ref"}, {200, "cpu_gemm_ref"}, {300, "cpu_layernorm_ref"},
      {301, "cuda_layernorm_warp_vec16"}, {302, "cuda_layernorm_block_vec16"}, {303, "cuda_layernorm_block"},
      {304, "cuda_layernorm_split"}, {305, "cuda_layernorm_split_vec16"}, {400, "cpu_rmsnorm_ref"},
      {401, "cuda_rmsnorm_warp_vec16"}, {402, "cuda_rmsnorm_block_vec16"}, {403, "cuda_rmsnorm_block"},
      {404, "cuda_rmsnorm_split"}, {405, "cuda_rmsnorm_split_vec16"}, {500, "cpu_softmax_ref"},
      {501, "cuda_softmax_warp_vec16"}, {502, "cuda_softmax_block_vec16"}, {503, "cuda_softmax_block"},
      {504, "cuda_softmax_split"}, {505, "cuda_softmax_split_vec16"}, {600, "cpu_sin_affine_ref"},
      {601, "cuda_sin_affine_vec16"}, {602, "cuda_sin_affine_strided"}, {700, "cpu_unary_ref"},
      {701, "cuda_unary_vec16"}, {702, "cuda_unary_strided"}, {800, "cpu_binary_ref"},
      {801, "cuda_binary_vec16"}, {802, "cuda_binary_strided"}, {900, "cpu_reduce_ref"},
      {901, "cuda_reduce_rows_vec16"}, {902, "cuda_reduce_rows"}, {903, "cuda_reduce_columns_vec16"},
      {904, "cuda_reduce_columns"}, {905, "cuda_reduce_strided"}, {906, "cuda_reduce_columns_cluster"}, {1000, "cpu_scale_ref"},
      {1001, "cuda_scale_vec16"}, {1002, "cuda_scale_strided"}, {1100, "cpu_ew_chain_ref"},
      {1101, "cuda_ew_chain_vec16"}, {1102, "cuda_ew_chain_strided"}, {1200, "cpu_dropout_ref"},
      {1201, "cuda_dropout_vec16"}, {1202, "cuda_dropout_strided"}, {1300, "cpu_layernorm_backward_ref"},
      {1301, "cuda_layernorm_backward_vec16"}, {1302, "cuda_layernorm_backward_block"}, {1303, "cuda_layernorm_backward_stream"},
      {1304, "cuda_layernorm_backward_stream_vec16"}, {1400, "cpu_rmsnorm_backward_ref"}, {1401, "cuda_rmsnorm_backward_vec16"},
      {1402, "cuda_rmsnorm_backward_block"}, {1403, "cuda_rmsnorm_backward_stream"}, {1404, "cuda_rmsnorm_backward_stream_vec16"},
      {1500, "cpu_softmax_backward_ref"}, {1501, "cuda_softmax_backward_vec16"}, {1502, "cuda_softmax_backward_block"},
      {1503, "cuda_softmax_backward_stream"}, {1504, "cuda_softmax_backward_stream_vec16"},
      {201, "cuda_gemm_sm90_128x256"}, {202, "cuda_gemm_sm90_128x128"}, {203, "cuda_gemm_mma"},
      {204, "cuda_gemm_ffma"}, {205, "cuda_gemv_n1"}, {206, "cuda_gemv_m1"},
      {207, "cuda_gemm_mma_cp"}, {208, "cuda_gemm_tf32"},
      {101, "cuda_sdpa_mma_d64"}, {102, "cuda_sdpa_mma_d128"}, {103, "cuda_sdpa_mma_d256"},
      {104, "cuda_sdpa_sm90_d64"}, {105, "cuda_sdpa_sm90_d128"}, {106, "cuda_sdpa_sm90_d256"},
      {1305, "cuda_layernorm_backward_staged"}, {1405, "cuda_rmsnorm_backward_staged"},
      {107, "cuda_sdpa_sm90_d64_pair"}, {108, "cuda_sdpa_sm90_d128_pair"}, {209, "cpu_gemm_panel"},
      {109, "cuda_sdpa_split_d64_m16"}, {110, "cuda_sdpa_split_d64_m64"}, {111, "cuda_sdpa_split_d128_m16"},
      {112, "cuda_sdpa_split_d128_m64"}, {113, "cuda_sdpa_split_d256_m16"}, {114, "cuda_sdpa_split_d256_m64"},
      {1600, "cpu_rope_ref"}, {1601, "cuda_rope_vec16"}, {1602, "cuda_rope_strided"},
      {1700, "cpu_kv_cache_append_ref"}, {1701, "cuda_kv_cache_append_vec16"}, {1702, "cuda_kv_cache_append_strided"},
      {1703, "cuda_kv_cache_append_rows"},
      {210, "cuda_gemm_sm90_128x128_splitk"}, {211, "cuda_gemm_sm90_128x256_splitk"},
      {212, "cuda_gemm_sm90_128x64"}, {213, "cuda_gemm_sm90_128x64_splitk"},
      {214, "cuda_gemm_sm90_128x192"},
      {1800, "cpu_sdpa_backward_ref"}, {1801, "cuda_sdpa_backward_mma_d64"}, {1802, "cuda_sdpa_backward_mma_d128"},
      {1803, "cuda_sdpa_backward_sm90_d64"}, {1804, "cuda_sdpa_backward_sm90_d128"},
      {1805, "cuda_sdpa_backward_sm90_det_d64"}, {1806, "cuda_sdpa_backward_sm90_det_d128"},
      {115, "cuda_sdpa_sm90_d64_m128"},
      {215, "cuda_gemm_sm90_128x112"}, {216, "cuda_gemm_sm90_128x112_splitk"},
      {217, "cuda_gemm_sm90_128x96"}, {218, "cuda_gemm_sm90_128x96_splitk"},
      {1807, "cuda_sdpa_backward_mma_d256"},
      {1808, "cuda_sdpa_backward_sm90_d256"}, {1809, "cuda_sdpa_backward_sm90_det_d256"},
  };
  const size_t n = sizeof shipped / sizeof shipped[0];
  for (size_t i = 0; i < n; ++i) {
    ops_kernel_info info;
    info.struct_size = sizeof info;
    if (ops_kernel_info_by_name(shipped[i].name, &info) != OPS_OK || info.kernel_id != shipped[i].id) {
      print_error("%s: expected kernel id %d, got %s\n", shipped[i].name, (int)shipped[i].id, ops_last_error());
      fail();
    }
    assert_int_equal(info.kernel_id, shipped[i].id);
  }
  assert_int_equal(ops_kernel_count(), (int)n); /* a new kernel is listed above too */
}

static void machine_models_are_sane(void **state) {
  (void)state;
  int n = 0;
  const opsi_machine *m = opsi_machines(&n);
  for (int i = 0; i < n; ++i) {
    assert_true(m[i].mem_gbps > 0 && m[i].launch_us >= 0);
    assert_non_null(m[i].source);
    if (m[i].backend == OPS_DEVICE_CUDA) {
      assert_true(m[i].tflops[OPSI_UNIT_FFMA] > 0 && m[i].tflops[OPSI_UNIT_MMA_F16] > 0);
      assert_true(m[i].ref_sm_count > 0 && m[i].smem_per_block_optin > 0);
    }
  }
  assert_int_equal(opsi_machine_for(OPS_DEVICE_CUDA, 90)->ref_sm, 90);
  assert_int_equal(opsi_machine_for(OPS_DEVICE_CUDA, 100)->ref_sm, 90); /* newest family at or below */
  assert_int_equal(opsi_machine_for(OPS_DEVICE_CUDA, 86)->ref_sm, 89);
  assert_int_equal(opsi_machine_for(OPS_DEVICE_CUDA, 75)->ref_sm, 80); /* older than all: the oldest */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rows_are_consistent),
      cmocka_unit_test(every_op_has_a_cpu_reference),
      cmocka_unit_test(public_catalog_matches_the_rows),
      cmocka_unit_test(warp_roles_are_whole),
      cmocka_unit_test(shipped_kernel_ids_never_change),
      cmocka_unit_test(machine_models_are_sane),
  };
  return cmocka_run_group_tests_name("catalog", tests, NULL, NULL);
}
