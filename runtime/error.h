/*
 * The one place opslib sets its thread-local error message.
 *
 * Every failing check calls opsi_fail(status, "format", ...) and returns what it returns,
 * so that each check is one line and the message always matches the status. Entry points
 * call opsi_clear_error() first so ops_last_error() says "" after a success.
 */
#ifndef OPSLIB_RUNTIME_ERROR_H_
#define OPSLIB_RUNTIME_ERROR_H_

#include "opslib/status.h"

#define OPSI_ERROR_MESSAGE_BYTES 2048

#if defined(__GNUC__)
#define OPSI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define OPSI_PRINTF(f, a)
#endif

/* Sets the message (printf-style) and returns status. */
ops_status opsi_fail(ops_status status, const char *fmt, ...) OPSI_PRINTF(2, 3);

/* Appends to the current message (used to list one reason per rejected kernel). */
void opsi_append_error(const char *fmt, ...) OPSI_PRINTF(1, 2);

void opsi_clear_error(void);

/* Propagate a failure: OPSI_TRY(expr) returns expr's status from the caller if not OPS_OK. */
#define OPSI_TRY(expr)                 \
  do {                                 \
    ops_status opsi_try_st_ = (expr);  \
    if (opsi_try_st_ != OPS_OK) {      \
      return opsi_try_st_;             \
    }                                  \
  } while (0)

#endif /* OPSLIB_RUNTIME_ERROR_H_ */
