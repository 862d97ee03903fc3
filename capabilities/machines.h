/*
 * Machine models: per SM family (and the CPU), the coefficients of the cost model and the
 * limits the consistency checks hold kernels to. Data, not code: a new GPU generation is
 * a new row here, not a branch in the dispatcher.
 */
#ifndef OPSLIB_CAPABILITIES_MACHINES_H_
#define OPSLIB_CAPABILITIES_MACHINES_H_

#include <stdint.h>

#include "capabilities/rows.h"

typedef struct opsi_machine {
  const char *name;         /* "hopper: H100 SXM" */
  int32_t backend;          /* ops_device_type */
  int32_t sm_min, sm_max;   /* the family's SM versions (CUDA) */
  double mem_gbps;          /* device-memory copy bandwidth, bytes read + written */
  double launch_us;         /* fixed cost of one kernel launch */
  double tflops[OPSI_UNIT_COUNT]; /* peak rate per unit (0: the unit does not exist here) */
  const char *source;       /* where the numbers come from */
  /* the family's reference device, for described (virtual) handles and the CLI */
  int32_t ref_sm;
  int32_t ref_sm_count;
  int64_t smem_per_block_optin;
  int64_t smem_per_sm;
  int64_t l2_bytes;
  const char *ref_name;
} opsi_machine;

/* The model for a backend and SM (the newest family at or below sm); never NULL. */
const opsi_machine *opsi_machine_for(int32_t backend, int32_t sm);

/* Every model, for listing and checks. */
const opsi_machine *opsi_machines(int *count);

#endif /* OPSLIB_CAPABILITIES_MACHINES_H_ */
