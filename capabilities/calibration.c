/* The calibration sets (see calibration.h), one generated file each. */
#include "capabilities/calibration.h"

#include <stddef.h>

extern const opsi_calibration_set opsi_calibration_h100;

static const opsi_calibration_set *const k_sets[] = {&opsi_calibration_h100};
#define SET_COUNT ((int)(sizeof k_sets / sizeof k_sets[0]))

const opsi_calibration *opsi_calibration_for(int32_t kernel_id, int32_t sm, const opsi_calibration_set **set) {
  for (int s = 0; s < SET_COUNT; ++s) {
    const opsi_calibration_set *cs = k_sets[s];
    if (sm < cs->sm_min || sm > cs->sm_max) continue;
    for (int32_t i = 0; i < cs->count; ++i) {
      if (cs->entries[i].kernel_id == kernel_id) {
        if (set != NULL) *set = cs;
        return &cs->entries[i];
      }
    }
  }
  return NULL;
}

const opsi_calibration_set *const *opsi_calibration_sets(int *count) {
  *count = SET_COUNT;
  return k_sets;
}
