/* The int-coded operator mapping: op id <-> name (public: ops_op_name, ops_op_from_name). */
#ifndef OPSLIB_DISPATCH_OP_NAMES_H_
#define OPSLIB_DISPATCH_OP_NAMES_H_

#include "opslib/explain.h"

#endif /* OPSLIB_DISPATCH_OP_NAMES_H_ */
