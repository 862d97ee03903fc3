/* The feature coverage of coverage.h. */
#include "tests/support/coverage.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#define MAX_KERNELS 256
#define MAX_FEATURES 24

typedef struct {
  char kernel[64];
  int n;
  char features[MAX_FEATURES][24];
  int launches;       /* CUDA launches whose geometry was held to the row */
  char mismatch[160]; /* the first launch that broke its row's claim, in words */
} seen_kernel;

static seen_kernel g_seen[MAX_KERNELS];
static int g_overflow;
static int g_count;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_launches; /* delivered so far; the newest one's kernel and plan: */
static char g_last_kernel[64], g_last_plan[192];

static seen_kernel *kernel_slot(const char *name) {
  for (int i = 0; i < g_count; ++i) {
    if (strcmp(g_seen[i].kernel, name) == 0) return &g_seen[i];
  }
  if (g_count == MAX_KERNELS) {
    g_overflow = 1; /* opst_coverage_check fails: a kernel left out here would read as "never ran" */
    return NULL;
  }
  seen_kernel *k = &g_seen[g_count++];
  snprintf(k->kernel, sizeof k->kernel, "%s", name);
  k->n = 0;
  return k;
}

static void note(seen_kernel *k, const char *feature, size_t len) {
  for (int i = 0; i < k->n; ++i) {
    if (strlen(k->features[i]) == len && strncmp(k->features[i], feature, len) == 0) return;
  }
  if (k->n < MAX_FEATURES && len < sizeof k->features[0]) {
    memcpy(k->features[k->n], feature, len);
    k->features[k->n++][len] = '\0';
  }
}

/* The problem text lists the call's features in brackets: "... [causal, gqa] align=16". */
void opst_coverage_note(const char *kernel, const char *problem) {
  pthread_mutex_lock(&g_lock);
  seen_kernel *k = kernel_slot(kernel);
  const char *open = strchr(problem, '['), *close = open ? strchr(open, ']') : NULL;
  for (const char *s = open ? open + 1 : NULL; k != NULL && s != NULL && s < close;) {
    const char *end = strchr(s, ',');
    if (end == NULL || end > close) end = close;
    note(k, s, (size_t)(end - s));
    s = end + (*end == ',' ? 2 : 1);
  }
  pthread_mutex_unlock(&g_lock);
}

/* What a CUDA launch used against what its row claims: for the kernels whose shape is fixed
 * (attention and GEMM: one block size, one shared-memory size, one cluster size a kernel, or
 * for a split GEMM the parts its plan names), equal; for the others, whose rows state the most a launch takes (row-group sizes, static
 * reduction buffers), at most that. */
static void hold_to_row(seen_kernel *k, const ops_profile_record *r) {
  ops_kernel_info info;
  info.struct_size = sizeof info;
  if (r->device.type != OPS_DEVICE_CUDA || ops_kernel_info_by_name(r->kernel_name, &info) != OPS_OK) return;
  const int threads = r->block[0] * r->block[1] * r->block[2];
  const int fixed = info.op == OPS_OP_SDPA || info.op == OPS_OP_GEMM;
  /* a split GEMM's clusters are its parts, which its plan states ("K split in N parts"), as
   * are a split-KV call's when a cluster merges them ("keys split in N parts, merged in a
   * cluster") and an unsplit GEMM's spread over the GPCs ("blocks in clusters of N") */
  int parts = 0;
  const char *plan = r->launch_plan;
  const char *spread = plan != NULL ? strstr(plan, "blocks in clusters of ") : NULL;
  const int split = plan != NULL && (sscanf(plan, "K split in %d parts", &parts) == 1 ||
                                     (strstr(plan, "merged in a cluster") != NULL &&
                                      sscanf(plan, "keys split in %d parts", &parts) == 1) ||
                                     (spread != NULL && sscanf(spread, "blocks in clusters of %d", &parts) == 1));
  const int ok = fixed ? threads == info.threads && r->smem_bytes == info.smem_bytes &&
                             (split ? r->cluster_blocks == parts : r->cluster_blocks == info.cluster_blocks)
                       : threads <= info.threads && r->smem_bytes <= info.smem_bytes && r->cluster_blocks <= info.cluster_blocks;
  ++k->launches;
  if (!ok && k->mismatch[0] == '\0') {
    snprintf(k->mismatch, sizeof k->mismatch,
             "launched %d threads, %d B of shared memory, clusters of %d; its row claims %s%d, %s%d, %s%d", threads,
             r->smem_bytes, r->cluster_blocks, fixed ? "" : "<= ", info.threads, fixed ? "" : "<= ",
             info.smem_bytes, fixed ? "" : "<= ", info.cluster_blocks);
  }
}

static void record(const ops_profile_record *r, void *user) {
  (void)user;
  opst_coverage_note(r->kernel_name, r->problem);
  pthread_mutex_lock(&g_lock);
  seen_kernel *k = kernel_slot(r->kernel_name);
  if (k != NULL) hold_to_row(k, r);
  ++g_launches;
  snprintf(g_last_kernel, sizeof g_last_kernel, "%s", r->kernel_name);
  snprintf(g_last_plan, sizeof g_last_plan, "%s", r->launch_plan != NULL ? r->launch_plan : "");
  pthread_mutex_unlock(&g_lock);
}

int opst_coverage_last_launch(char *kernel, size_t kernel_size, char *plan, size_t plan_size) {
  pthread_mutex_lock(&g_lock);
  snprintf(kernel, kernel_size, "%s", g_last_kernel);
  snprintf(plan, plan_size, "%s", g_last_plan);
  const int n = g_launches;
  pthread_mutex_unlock(&g_lock);
  return n;
}

void opst_coverage_start(ops_handle h) {
  if (ops_handle_set_profiler(h, record, NULL) != OPS_OK) {
    print_error("opst_coverage_start: %s\n", ops_last_error());
    fail();
  }
}

void opst_coverage_check(const char *test_target) {
  int missing = 0, checked = 0;
  if (g_overflow) {
    print_error("coverage: more than %d kernels ran; raise MAX_KERNELS\n", MAX_KERNELS);
    ++missing;
  }
  for (int i = 0; i < ops_kernel_count(); ++i) {
    ops_kernel_info info;
    info.struct_size = sizeof info;
    if (ops_kernel_info_at(i, &info) != OPS_OK || info.tests == NULL || strstr(info.tests, test_target) == NULL) {
      continue;
    }
    ++checked;
    seen_kernel *k = NULL;
    for (int j = 0; j < g_count; ++j) {
      if (strcmp(g_seen[j].kernel, info.name) == 0) k = &g_seen[j];
    }
    if (k == NULL) {
      print_error("%s never ran in %s\n", info.name, test_target);
      ++missing;
      continue;
    }
    if (k->mismatch[0] != '\0') {
      print_error("%s: %s\n", info.name, k->mismatch);
      ++missing;
    }
    const char *s = info.features;
    while (*s) {
      const char *end = strchr(s, ',');
      const size_t len = end ? (size_t)(end - s) : strlen(s);
      int found = 0;
      for (int f = 0; f < k->n; ++f) {
        found = found || (strlen(k->features[f]) == len && strncmp(k->features[f], s, len) == 0);
      }
      if (!found) {
        print_error("%s claims '%.*s', which no call of %s exercised\n", info.name, (int)len, s, test_target);
        ++missing;
      }
      s = end ? end + 2 : s + len;
    }
  }
  int held = 0;
  for (int j = 0; j < g_count; ++j) held += g_seen[j].launches > 0;
  printf("[ COVERAGE ] %d kernel(s) tested by %s: %s; %d kernel(s)' launches held to their rows' block, "
         "shared memory and cluster\n",
         checked, test_target, missing ? "features missing or launches off their rows" : "every claimed feature exercised",
         held);
  if (checked == 0 || missing > 0) fail();
}
