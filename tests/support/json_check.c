/* Recursive-descent JSON syntax check. */
#include "tests/support/json_check.h"

#include <ctype.h>
#include <string.h>

static const char *value(const char *s, int depth);

static const char *ws(const char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') ++s;
  return s;
}

static const char *string(const char *s) {
  if (*s != '"') return NULL;
  for (++s; *s && *s != '"'; ++s) {
    if ((unsigned char)*s < 0x20) return NULL;
    if (*s == '\\') {
      ++s;
      if (*s == 'u') {
        for (int i = 1; i <= 4; ++i) {
          if (!isxdigit((unsigned char)s[i])) return NULL;
        }
        s += 4;
      } else if (!strchr("\"\\/bfnrt", *s) || *s == '\0') {
        return NULL;
      }
    }
  }
  return *s == '"' ? s + 1 : NULL;
}

static const char *number(const char *s) {
  if (*s == '-') ++s;
  if (*s == '0') {
    ++s;
  } else if (isdigit((unsigned char)*s)) {
    while (isdigit((unsigned char)*s)) ++s;
  } else {
    return NULL;
  }
  if (*s == '.') {
    ++s;
    if (!isdigit((unsigned char)*s)) return NULL;
    while (isdigit((unsigned char)*s)) ++s;
  }
  if (*s == 'e' || *s == 'E') {
    ++s;
    if (*s == '+' || *s == '-') ++s;
    if (!isdigit((unsigned char)*s)) return NULL;
    while (isdigit((unsigned char)*s)) ++s;
  }
  return s;
}

static const char *members(const char *s, int depth, char close, int keyed) {
  s = ws(s + 1);
  if (*s == close) return s + 1;
  for (;;) {
    if (keyed) {
      s = string(ws(s));
      if (s == NULL) return NULL;
      s = ws(s);
      if (*s != ':') return NULL;
      ++s;
    }
    s = value(s, depth + 1);
    if (s == NULL) return NULL;
    s = ws(s);
    if (*s == close) return s + 1;
    if (*s != ',') return NULL;
    ++s;
  }
}

static const char *value(const char *s, int depth) {
  if (depth > 64) return NULL;
  s = ws(s);
  switch (*s) {
    case '{': return members(s, depth, '}', 1);
    case '[': return members(s, depth, ']', 0);
    case '"': return string(s);
    case 't': return strncmp(s, "true", 4) == 0 ? s + 4 : NULL;
    case 'f': return strncmp(s, "false", 5) == 0 ? s + 5 : NULL;
    case 'n': return strncmp(s, "null", 4) == 0 ? s + 4 : NULL;
    default: return number(s);
  }
}

int opst_json_valid(const char *text) {
  const char *end = value(text, 0);
  return end != NULL && *ws(end) == '\0';
}
