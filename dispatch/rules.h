/*
 * Declarative eligibility rules. Each rule is a predicate over (problem, row, device) with
 * a stable reason code and a message; a row is eligible when every rule passes. The rules
 * read only fields of the problem and the row, so adding a kernel never means adding an
 * `if` here, only data in capabilities/.
 */
#ifndef OPSLIB_DISPATCH_RULES_H_
#define OPSLIB_DISPATCH_RULES_H_

#include <stddef.h>

#include "capabilities/rows.h"
#include "opslib/handle.h"

/* Why a row is not eligible. Stable values. */
typedef enum opsi_reason {
  OPSI_REASON_ELIGIBLE = 0,
  OPSI_REASON_BACKEND = 1,     /* the row runs on another kind of device */
  OPSI_REASON_SM_TOO_OLD = 2,  /* the device's SM is below the row's range */
  OPSI_REASON_SM_TOO_NEW = 3,  /* above it */
  OPSI_REASON_DTYPE = 4,       /* input dtype not supported */
  OPSI_REASON_OUT_DTYPE = 5,   /* output dtype not supported */
  OPSI_REASON_VARIANT = 6,     /* activation / binary op / reduce op not implemented */
  OPSI_REASON_FEATURE = 7,     /* a feature of the call (causal, varlen, bias...) not implemented */
  OPSI_REASON_ALIGNMENT = 8,   /* operands less aligned than the row needs */
  OPSI_REASON_SHAPE = 9,       /* an extent outside the row's limits */
  OPSI_REASON_MATH_MODE = 10,  /* the row rounds to tf32 and the handle is strict */
  OPSI_REASON_DETERMINISM = 11,/* the handle wants determinism and the row is not */
  OPSI_REASON_SMEM = 12        /* the row needs more shared memory than the device has */
} opsi_reason;

typedef int (*opsi_rule_check)(const opsi_problem *p, const opsi_kernel_row *r,
                               const ops_device_info *dev, char *msg, size_t n);

typedef struct opsi_rule {
  opsi_reason reason;
  const char *name;
  opsi_rule_check check; /* 1: passes; 0: fails and writes why into msg */
} opsi_rule;

const opsi_rule *opsi_rules(size_t *count);

/* The first rule that `r` fails for `p`, with its message; OPSI_REASON_ELIGIBLE if none. */
opsi_reason opsi_rules_check(const opsi_problem *p, const opsi_kernel_row *r,
                             const ops_device_info *dev, char *msg, size_t n);

const char *opsi_reason_name(opsi_reason reason);

/* Names of the OPSI_F_* bits in `flags`, comma separated. */
const char *opsi_flag_names(uint32_t flags, char *buf, size_t n);

/* The name of dims[index] for `op` ("head_dim"), or "dims[i]". */
const char *opsi_dim_name(int32_t op, int index);

#endif /* OPSLIB_DISPATCH_RULES_H_ */
