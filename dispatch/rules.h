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
#include "opslib/explain.h"
#include "opslib/handle.h"


typedef int (*opsi_rule_check)(const opsi_problem *p, const opsi_kernel_row *r,
                               const ops_device_info *dev, char *msg, size_t n);

typedef struct opsi_rule {
  ops_reason reason;
  const char *name;
  opsi_rule_check check; /* 1: passes; 0: fails and writes why into msg */
} opsi_rule;

const opsi_rule *opsi_rules(size_t *count);

/* The first rule that `r` fails for `p`, with its message; OPS_REASON_ELIGIBLE if none. */
ops_reason opsi_rules_check(const opsi_problem *p, const opsi_kernel_row *r,
                             const ops_device_info *dev, char *msg, size_t n);


/* Names of the OPSI_F_* bits in `flags`, comma separated. */
const char *opsi_flag_names(uint32_t flags, char *buf, size_t n);

/* The name of dims[index] for `op` ("head_dim"), or "dims[i]". */
const char *opsi_dim_name(int32_t op, int index);

#endif /* OPSLIB_DISPATCH_RULES_H_ */
