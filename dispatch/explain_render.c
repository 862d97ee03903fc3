/* ops_explain as text (one line per candidate) and as one JSON object. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dispatch/op_names.h"
#include "opslib/explain.h"
#include "opslib/handle.h"

/* An snprintf-style appender: counts what the whole text needs, writes what fits. */
typedef struct {
  char *buf;
  size_t n, used;
} sink;

static void put(sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(sink *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const size_t room = s->used < s->n ? s->n - s->used : 0;
  const int k = vsnprintf(room ? s->buf + s->used : NULL, room, fmt, ap);
  va_end(ap);
  if (k > 0) s->used += (size_t)k;
}

static void put_json_string(sink *s, const char *text) {
  put(s, "\"");
  for (const unsigned char *c = (const unsigned char *)text; c != NULL && *c; ++c) {
    if (*c == '"' || *c == '\\') put(s, "\\%c", *c);
    else if (*c < 0x20) put(s, "\\u%04x", *c);
    else put(s, "%c", *c);
  }
  put(s, "\"");
}

static size_t finish(sink *s) {
  if (s->n > 0) s->buf[s->used < s->n ? s->used : s->n - 1] = '\0';
  return s->used;
}

/* 1 when e has the fields appended after the first layout. */
static int has_choice(const ops_explain *e) { return e->struct_size >= sizeof(ops_explain); }

size_t ops_explain_to_text(const ops_explain *e, char *buf, size_t n) {
  sink s = {buf, n, 0};
  if (e == NULL) return finish(&s);
  const int full = has_choice(e);
  put(&s, "%s\n", e->problem);
  if (e->empty) put(&s, "  (the outputs have no elements: nothing runs)\n");
  for (int i = 0; i < e->count; ++i) {
    const ops_verdict *v = &e->verdicts[i];
    put(&s, "  %s %-28s id %-5d %-12s", i == e->chosen ? "*" : " ", v->kernel_name, v->kernel_id,
        ops_reason_name((ops_reason)v->reason));
    if (v->reason == OPS_REASON_ELIGIBLE) put(&s, " est %.2f us", v->est_us);
    if (full && e->measured_us[i] > 0) put(&s, " measured %.2f us", e->measured_us[i]);
    if (v->message[0] != '\0') put(&s, "  %s", v->message);
    if (full && e->plan[i] != NULL) put(&s, "; plan: %s", e->plan[i]);
    put(&s, "\n");
  }
  if (e->chosen >= 0) {
    put(&s, "chosen: %s", e->verdicts[e->chosen].kernel_name);
    if (full) put(&s, " (%s: %s)", ops_choice_name((ops_choice)e->choice), e->choice_note);
    put(&s, "\n");
  } else {
    put(&s, "chosen: none (no kernel of this build is eligible)\n");
  }
  return finish(&s);
}

size_t ops_explain_to_json(const ops_explain *e, char *buf, size_t n) {
  sink s = {buf, n, 0};
  if (e == NULL) {
    put(&s, "null");
    return finish(&s);
  }
  put(&s, "{\"op\":");
  put_json_string(&s, ops_op_name((ops_op)e->op));
  put(&s, ",\"problem\":");
  put_json_string(&s, e->problem);
  put(&s, ",\"empty\":%s,\"chosen\":", e->empty ? "true" : "false");
  if (e->chosen >= 0) put_json_string(&s, e->verdicts[e->chosen].kernel_name); else put(&s, "null");
  const int full = has_choice(e);
  if (full) {
    put(&s, ",\"choice\":");
    put_json_string(&s, ops_choice_name((ops_choice)e->choice));
    put(&s, ",\"choice_note\":");
    put_json_string(&s, e->choice_note);
  }
  put(&s, ",\"candidates\":[");
  for (int i = 0; i < e->count; ++i) {
    const ops_verdict *v = &e->verdicts[i];
    put(&s, "%s{\"kernel_id\":%d,\"name\":", i ? "," : "", v->kernel_id);
    put_json_string(&s, v->kernel_name);
    put(&s, ",\"eligible\":%s,\"reason\":", v->reason == OPS_REASON_ELIGIBLE ? "true" : "false");
    put_json_string(&s, ops_reason_name((ops_reason)v->reason));
    put(&s, ",\"reason_code\":%d,\"est_us\":%.4f,\"message\":", v->reason, v->est_us);
    put_json_string(&s, v->message);
    if (full) {
      if (e->measured_us[i] > 0) put(&s, ",\"measured_us\":%.4f", e->measured_us[i]);
      if (e->plan[i] != NULL) {
        put(&s, ",\"plan\":");
        put_json_string(&s, e->plan[i]);
      }
    }
    put(&s, "}");
  }
  put(&s, "]}");
  return finish(&s);
}
