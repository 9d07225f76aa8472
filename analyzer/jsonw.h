/*
 * jsonw.h - a small streaming JSON writer for every `stepprof` verb.
 *
 * Values go straight to a FILE*; the writer only remembers, per nesting level,
 * whether a comma is due, so memory is constant whatever the document's size.
 *
 *   struct jsonw w;
 *   jw_init(&w, stdout, 0);             // 0: compact, 1: indented by 2
 *   jw_obj_begin(&w);
 *   jw_kstr(&w, "schema", "stepprof.analysis/1");
 *   jw_karr_begin(&w, "iterations");
 *   for (...) { jw_obj_begin(&w); jw_ku64(&w, "wall_ns", ns); jw_obj_end(&w); }
 *   jw_arr_end(&w);
 *   jw_kdouble(&w, "fraction", 0.25);
 *   jw_obj_end(&w);                     // a finished top-level value ends with "\n"
 *   if (jw_error(&w)) ...               // unbalanced calls or a write error
 *
 * Every top-level value is followed by a newline, so writing several objects in a
 * row gives JSON Lines (`stepprof dump --json`). Inside an object, call jw_key()
 * (or a jw_k* shorthand) before each value; misuse is reported by jw_error(), not
 * by a crash. Strings are escaped (quote, backslash, control characters) and
 * made valid UTF-8: an invalid byte becomes U+FFFD, because trace strings (paths,
 * kernel names) are arbitrary bytes. Doubles use the shortest form that reads
 * back exactly; NaN and infinities become null (JSON has no such numbers).
 */
#ifndef STEPPROF_JSONW_H
#define STEPPROF_JSONW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JW_MAX_DEPTH 64

struct jsonw {
	FILE *f;
	int pretty;
	int depth;
	int err;		     /* nonzero after misuse or a write error */
	uint8_t count[JW_MAX_DEPTH]; /* values written at each level (saturating: only 0/1+ matter) */
	uint8_t is_obj[JW_MAX_DEPTH];
	int key_pending; /* a key was written, its value not yet */
};

void jw_init(struct jsonw *w, FILE *f, int pretty);

void jw_obj_begin(struct jsonw *w);
void jw_obj_end(struct jsonw *w);
void jw_arr_begin(struct jsonw *w);
void jw_arr_end(struct jsonw *w);
void jw_key(struct jsonw *w, const char *key);

void jw_str(struct jsonw *w, const char *s); /* NULL writes null */
void jw_strn(struct jsonw *w, const char *s, size_t n);
void jw_u64(struct jsonw *w, uint64_t v);
void jw_i64(struct jsonw *w, int64_t v);
void jw_double(struct jsonw *w, double v);
void jw_bool(struct jsonw *w, int v);
void jw_null(struct jsonw *w);
void jw_hex(struct jsonw *w, uint64_t v); /* the string "0x..." (lower case) */

/* key + value in one call */
void jw_kstr(struct jsonw *w, const char *key, const char *s);
void jw_ku64(struct jsonw *w, const char *key, uint64_t v);
void jw_ki64(struct jsonw *w, const char *key, int64_t v);
void jw_kdouble(struct jsonw *w, const char *key, double v);
void jw_kbool(struct jsonw *w, const char *key, int v);
void jw_knull(struct jsonw *w, const char *key);
void jw_khex(struct jsonw *w, const char *key, uint64_t v);
void jw_kobj_begin(struct jsonw *w, const char *key);
void jw_karr_begin(struct jsonw *w, const char *key);

/* 0 when every value was complete and written; -1 otherwise (also checks ferror). */
int jw_error(struct jsonw *w);

#endif /* STEPPROF_JSONW_H */
