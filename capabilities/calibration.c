/* The calibration sets (see calibration.h), one generated file each. */
#include "capabilities/calibration.h"

#include <stddef.h>
#include <string.h>

extern const opsi_calibration_set opsi_calibration_h100;
extern const opsi_calibration_set opsi_calibration_h200;

/* The SM family's reference device first: a device no set was measured on takes its entries. */
static const opsi_calibration_set *const k_sets[] = {&opsi_calibration_h100, &opsi_calibration_h200};
#define SET_COUNT ((int)(sizeof k_sets / sizeof k_sets[0]))

/* The kernel's entry of plan words that `plan` contains, else its entry without plan words */
static const opsi_calibration *entry_of(const opsi_calibration_set *cs, int32_t kernel_id, const char *plan) {
  const opsi_calibration *any = NULL;
  for (int32_t i = 0; i < cs->count; ++i) {
    const opsi_calibration *e = &cs->entries[i];
    if (e->kernel_id != kernel_id) continue;
    if (e->plan == NULL) {
      if (any == NULL) any = e;
    } else if (plan != NULL && strstr(plan, e->plan) != NULL) {
      return e;
    }
  }
  return any;
}

static int holds_sm(const opsi_calibration_set *cs, int32_t sm) { return sm >= cs->sm_min && sm <= cs->sm_max; }

const opsi_calibration *opsi_calibration_for(int32_t kernel_id, const char *plan, int32_t sm, const char *device,
                                             const opsi_calibration_set **set) {
  const opsi_calibration_set *from = NULL;
  const opsi_calibration *e = NULL;
  for (int s = 0; s < SET_COUNT && e == NULL && device != NULL; ++s) { /* a set measured on the device */
    if (!holds_sm(k_sets[s], sm) || strcmp(device, k_sets[s]->device) != 0) continue;
    from = k_sets[s];
    e = entry_of(from, kernel_id, plan);
  }
  /* else the SM family's first set alone: another device's fit (its bandwidth, its math rate)
   * never costs a kernel that set lacks */
  for (int s = 0; s < SET_COUNT && e == NULL; ++s) {
    if (!holds_sm(k_sets[s], sm)) continue;
    from = k_sets[s];
    e = entry_of(from, kernel_id, plan);
    break;
  }
  if (e != NULL && set != NULL) *set = from;
  return e;
}

const opsi_calibration_set *const *opsi_calibration_sets(int *count) {
  *count = SET_COUNT;
  return k_sets;
}
