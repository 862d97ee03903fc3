/* A strict JSON syntax check (RFC 8259 values; no extensions), for tests of the JSON the
 * library writes: explain, fusion plans, profiler lines. */
#ifndef OPSLIB_TESTS_SUPPORT_JSON_CHECK_H_
#define OPSLIB_TESTS_SUPPORT_JSON_CHECK_H_

/* 1 when text is exactly one JSON value (surrounding whitespace allowed). */
int opst_json_valid(const char *text);

#endif /* OPSLIB_TESTS_SUPPORT_JSON_CHECK_H_ */
