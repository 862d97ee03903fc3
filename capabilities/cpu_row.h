/*
 * The fields every CPU reference row shares: host memory, no threads or shared memory,
 * element-size alignment, deterministic double-precision arithmetic in index order.
 */
#ifndef OPSLIB_CAPABILITIES_CPU_ROW_H_
#define OPSLIB_CAPABILITIES_CPU_ROW_H_

#include "capabilities/rows.h"

#define OPSI_NO_TILING {{-1, -1, -1}, {0, 0, 0}, {0, 0, 0}, {-1, -1, -1}, 0}

#define OPSI_CPU_ROW_COMMON                             \
  .backend = OPS_DEVICE_CPU, .sm_min = 0, .sm_max = 0,  \
  .dtypes = OPSI_FLOAT_DTYPES, .align = 1,              \
  .roles = {{NULL, 0, NULL}}, .stages = 0,              \
  .smem_layout = "none: host memory, read in place",    \
  .smem_bytes = 0, .threads = 0, .deterministic = 1,    \
  .unit = OPSI_UNIT_CPU, .efficiency = 1.0f,            \
  .bytes_factor = 1.0f, .tiling = OPSI_NO_TILING

#endif /* OPSLIB_CAPABILITIES_CPU_ROW_H_ */
