/* The machine models (see machines.h). Measured numbers say so; the rest are datasheet
 * peaks, which the per-kernel `efficiency` in each capability row scales down. */
#include "capabilities/machines.h"

#include <stddef.h>

#include "opslib/tensor.h"

/*                                 CPU    FFMA   MMA_F16  MMA_TF32  WGMMA_F16  WGMMA_TF32 */
static const opsi_machine k_machines[] = {
    {
        .name = "cpu: scalar double-precision references",
        .backend = OPS_DEVICE_CPU,
        .mem_gbps = 2.0,
        .launch_us = 0.2,
        .tflops = {1.0e-3, 0, 0, 0, 0, 0},
        .source = "measured: the CPU SDPA reference ran at 1.06 GFLOP/s on a 2-core CI machine (2026-11-22)",
        .ref_name = "cpu",
    },
    {
        .name = "ampere: A100",
        .backend = OPS_DEVICE_CUDA,
        .sm_min = 80, .sm_max = 85,
        .mem_gbps = 1400.0,
        .launch_us = 3.0,
        .tflops = {0, 19.5, 312.0, 156.0, 0, 0},
        .source = "datasheet (A100 SXM4 40GB); copy bandwidth ~90% of 1555 GB/s",
        .ref_sm = 80, .ref_sm_count = 108,
        .smem_per_block_optin = 166912, .smem_per_sm = 167936, .l2_bytes = 40LL << 20,
        .ref_name = "NVIDIA A100-SXM4-40GB (described)",
    },
    {
        .name = "ampere/ada: sm_86, sm_89",
        .backend = OPS_DEVICE_CUDA,
        .sm_min = 86, .sm_max = 89,
        .mem_gbps = 800.0,
        .launch_us = 3.0,
        .tflops = {0, 35.0, 140.0, 70.0, 0, 0},
        .source = "datasheet, rounded (A10 / L4 / RTX 30-40 class)",
        .ref_sm = 89, .ref_sm_count = 58,
        .smem_per_block_optin = 101376, .smem_per_sm = 102400, .l2_bytes = 48LL << 20,
        .ref_name = "NVIDIA L4 (described)",
    },
    {
        .name = "hopper: H100 SXM",
        .backend = OPS_DEVICE_CUDA,
        .sm_min = 90, .sm_max = 99,
        .mem_gbps = 3000.0,
        .launch_us = 2.5,
        .tflops = {0, 67.0, 660.0, 330.0, 989.0, 494.0},
        .source = "copy bandwidth measured on the H100 (3.0 TB/s); peaks from the datasheet "
                  "(mma.sync at two thirds of wgmma)",
        .ref_sm = 90, .ref_sm_count = 132,
        .smem_per_block_optin = 232448, .smem_per_sm = 233472, .l2_bytes = 50LL << 20,
        .ref_name = "NVIDIA H100 80GB HBM3 (described)",
    },
};

#define COUNT ((int)(sizeof k_machines / sizeof k_machines[0]))

const opsi_machine *opsi_machine_for(int32_t backend, int32_t sm) {
  const opsi_machine *best = &k_machines[0];
  for (int i = 0; i < COUNT; ++i) {
    const opsi_machine *m = &k_machines[i];
    if (m->backend != backend) continue;
    if (backend == OPS_DEVICE_CPU) return m;
    if (m->sm_min <= sm && (best->backend != OPS_DEVICE_CUDA || m->sm_min > best->sm_min)) best = m;
  }
  if (backend == OPS_DEVICE_CUDA && best->backend != OPS_DEVICE_CUDA) {
    for (int i = 0; i < COUNT; ++i) {
      if (k_machines[i].backend == OPS_DEVICE_CUDA) return &k_machines[i]; /* older than every family */
    }
  }
  return best;
}

const opsi_machine *opsi_machines(int *count) {
  *count = COUNT;
  return k_machines;
}
