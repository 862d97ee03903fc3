/* The calibration sets (see calibration.h), one generated file each. */
#include "capabilities/calibration.h"

#include <stddef.h>
#include <string.h>

extern const opsi_calibration_set opsi_calibration_h100;
extern const opsi_calibration_set opsi_calibration_h200;

/* The SM family's reference device first: a device no set was measured on takes its entries. */
static const opsi_calibration_set *const k_sets[] = {&opsi_calibration_h100, &opsi_calibration_h200};
#define SET_COUNT ((int)(sizeof k_sets / sizeof k_sets[0]))

static const opsi_calibration *entry_of(const opsi_calibration_set *cs, int32_t kernel_id) {
  for (int32_t i = 0; i < cs->count; ++i) {
    if (cs->entries[i].kernel_id == kernel_id) return &cs->entries[i];
  }
  return NULL;
}

const opsi_calibration *opsi_calibration_for(int32_t kernel_id, int32_t sm, const char *device,
                                             const opsi_calibration_set **set) {
  for (int pass = 0; pass < 2; ++pass) { /* the device's own sets, then the SM family's first */
    for (int s = 0; s < SET_COUNT; ++s) {
      const opsi_calibration_set *cs = k_sets[s];
      if (sm < cs->sm_min || sm > cs->sm_max) continue;
      if (pass == 0 && (device == NULL || strcmp(device, cs->device) != 0)) continue;
      const opsi_calibration *e = entry_of(cs, kernel_id);
      if (e != NULL) {
        if (set != NULL) *set = cs;
        return e;
      }
      /* a kernel the family's set lacks is not costed by another device's fit: its bandwidth
       * and math rate are that device's */
      if (pass == 1) return NULL;
    }
  }
  return NULL;
}

const opsi_calibration_set *const *opsi_calibration_sets(int *count) {
  *count = SET_COUNT;
  return k_sets;
}
