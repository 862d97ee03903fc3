/*
 * opslib/version.h: version of the headers, and of the library that is linked.
 *
 * OPS_VERSION_NUMBER is what these headers were written for; ops_version() is what the
 * linked library reports. They differ when an application built against one release is
 * linked against another; within one major version the ABI is kept (see README.md).
 */
#ifndef OPSLIB_VERSION_H_
#define OPSLIB_VERSION_H_

#define OPS_VERSION_MAJOR 0
#define OPS_VERSION_MINOR 1
#define OPS_VERSION_PATCH 0
#define OPS_VERSION_NUMBER (OPS_VERSION_MAJOR * 10000 + OPS_VERSION_MINOR * 100 + OPS_VERSION_PATCH)

#define OPS_STRINGIFY_(x) #x
#define OPS_STRINGIFY(x) OPS_STRINGIFY_(x)
#define OPS_VERSION_STRING                                                          \
  OPS_STRINGIFY(OPS_VERSION_MAJOR) "." OPS_STRINGIFY(OPS_VERSION_MINOR) "." OPS_STRINGIFY( \
      OPS_VERSION_PATCH)

#if defined(__GNUC__) || defined(__clang__)
#define OPS_API __attribute__((visibility("default")))
#else
#define OPS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The linked library's OPS_VERSION_NUMBER. Never fails; thread-safe. */
OPS_API unsigned ops_version(void);

/* The linked library's version as "MAJOR.MINOR.PATCH" (static storage). */
OPS_API const char *ops_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_VERSION_H_ */
