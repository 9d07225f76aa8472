/*
 * jsonw.c - the streaming JSON writer (jsonw.h).
 *
 * Divided into: 1. structure (separators, indentation, begin/end of containers),
 * 2. scalars (strings with escaping and UTF-8 repair, numbers), 3. key+value
 * shorthands.
 */
#include "jsonw.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ----------------------------------------------------------- 1. structure */

void jw_init(struct jsonw *w, FILE *f, int pretty)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
	w->pretty = pretty;
}

static void indent(struct jsonw *w)
{
	if (!w->pretty)
		return;
	fputc('\n', w->f);
	for (int i = 0; i < w->depth; i++)
		fputs("  ", w->f);
}

/* Before any value: the comma and indentation it needs, and whether it is allowed. */
static int before_value(struct jsonw *w)
{
	if (w->depth > 0) {
		int lvl = w->depth - 1;
		if (w->is_obj[lvl]) {
			if (!w->key_pending) {
				w->err = 1; /* a value in an object needs a key */
				return -1;
			}
			w->key_pending = 0;
		} else {
			if (w->count[lvl])
				fputc(',', w->f);
			indent(w);
		}
		w->count[lvl] = 1;
	}
	return 0;
}

/* After a value: a finished top-level value ends its line. */
static void after_value(struct jsonw *w)
{
	if (w->depth == 0)
		fputc('\n', w->f);
}

static void begin(struct jsonw *w, int obj)
{
	if (before_value(w))
		return;
	if (w->depth >= JW_MAX_DEPTH) {
		w->err = 1;
		return;
	}
	fputc(obj ? '{' : '[', w->f);
	w->is_obj[w->depth] = (uint8_t)obj;
	w->count[w->depth] = 0;
	w->depth++;
}

static void end(struct jsonw *w, int obj)
{
	if (w->depth == 0 || w->is_obj[w->depth - 1] != obj || w->key_pending) {
		w->err = 1;
		return;
	}
	w->depth--;
	if (w->count[w->depth])
		indent(w);
	fputc(obj ? '}' : ']', w->f);
	after_value(w);
}

void jw_obj_begin(struct jsonw *w)
{
	begin(w, 1);
}

void jw_obj_end(struct jsonw *w)
{
	end(w, 1);
}

void jw_arr_begin(struct jsonw *w)
{
	begin(w, 0);
}

void jw_arr_end(struct jsonw *w)
{
	end(w, 0);
}

static void put_string(struct jsonw *w, const char *s, size_t n);

void jw_key(struct jsonw *w, const char *key)
{
	if (w->depth == 0 || !w->is_obj[w->depth - 1] || w->key_pending) {
		w->err = 1;
		return;
	}
	int lvl = w->depth - 1;
	if (w->count[lvl])
		fputc(',', w->f);
	indent(w);
	w->count[lvl] = 1;
	put_string(w, key ? key : "", key ? strlen(key) : 0);
	fputs(w->pretty ? ": " : ":", w->f);
	w->key_pending = 1;
}

/* ------------------------------------------------------------- 2. scalars */

static void put_string(struct jsonw *w, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	FILE *f = w->f;
	fputc('"', f);
	size_t i = 0;
	while (i < n) {
		unsigned c = p[i];
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			/* Runs of plain ASCII in one write. */
			size_t j = i + 1;
			while (j < n && p[j] >= 0x20 && p[j] < 0x7f && p[j] != '"' && p[j] != '\\')
				j++;
			fwrite(p + i, 1, j - i, f);
			i = j;
			continue;
		}
		switch (c) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		case '\b':
			fputs("\\b", f);
			break;
		case '\f':
			fputs("\\f", f);
			break;
		default:
			if (c < 0x20 || c == 0x7f) {
				fprintf(f, "\\u%04x", c);
			} else {
				size_t l = util_utf8_len(p + i, n - i);
				if (l == 2 && c == 0xc2 && p[i + 1] < 0xa0) {
					/*
					 * A C1 control (U+0080-U+009F, e.g. U+009B, the 8-bit CSI)
					 * escaped as DEL is: the same string to a JSON reader, and
					 * no terminal control for a `cat` of the output.
					 */
					fprintf(f, "\\u%04x", p[i + 1]);
					i += 2;
					continue;
				}
				if (l) {
					fwrite(p + i, 1, l, f);
					i += l;
					continue;
				}
				fputs("\xef\xbf\xbd", f); /* U+FFFD for a byte that is not UTF-8 */
			}
		}
		i++;
	}
	fputc('"', f);
}

void jw_strn(struct jsonw *w, const char *s, size_t n)
{
	if (before_value(w))
		return;
	put_string(w, s, n);
	after_value(w);
}

void jw_str(struct jsonw *w, const char *s)
{
	if (!s) {
		jw_null(w);
		return;
	}
	jw_strn(w, s, strlen(s));
}

void jw_u64(struct jsonw *w, uint64_t v)
{
	if (before_value(w))
		return;
	fprintf(w->f, "%" PRIu64, v);
	after_value(w);
}

void jw_i64(struct jsonw *w, int64_t v)
{
	if (before_value(w))
		return;
	fprintf(w->f, "%" PRId64, v);
	after_value(w);
}

void jw_hex(struct jsonw *w, uint64_t v)
{
	if (before_value(w))
		return;
	fprintf(w->f, "\"0x%" PRIx64 "\"", v);
	after_value(w);
}

void jw_double(struct jsonw *w, double v)
{
	if (!isfinite(v)) {
		jw_null(w);
		return;
	}
	if (before_value(w))
		return;
	char buf[40];
	/* The shortest of %.15g/%.17g that reads back as the same double. */
	snprintf(buf, sizeof(buf), "%.15g", v);
	if (strtod(buf, NULL) != v)
		snprintf(buf, sizeof(buf), "%.17g", v);
	fputs(buf, w->f);
	after_value(w);
}

void jw_bool(struct jsonw *w, int v)
{
	if (before_value(w))
		return;
	fputs(v ? "true" : "false", w->f);
	after_value(w);
}

void jw_null(struct jsonw *w)
{
	if (before_value(w))
		return;
	fputs("null", w->f);
	after_value(w);
}

/* ----------------------------------------------------------- 3. shorthands */

void jw_kstr(struct jsonw *w, const char *key, const char *s)
{
	jw_key(w, key);
	jw_str(w, s);
}

void jw_ku64(struct jsonw *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	jw_u64(w, v);
}

void jw_ki64(struct jsonw *w, const char *key, int64_t v)
{
	jw_key(w, key);
	jw_i64(w, v);
}

void jw_kdouble(struct jsonw *w, const char *key, double v)
{
	jw_key(w, key);
	jw_double(w, v);
}

void jw_kbool(struct jsonw *w, const char *key, int v)
{
	jw_key(w, key);
	jw_bool(w, v);
}

void jw_knull(struct jsonw *w, const char *key)
{
	jw_key(w, key);
	jw_null(w);
}

void jw_khex(struct jsonw *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	jw_hex(w, v);
}

void jw_kobj_begin(struct jsonw *w, const char *key)
{
	jw_key(w, key);
	jw_obj_begin(w);
}

void jw_karr_begin(struct jsonw *w, const char *key)
{
	jw_key(w, key);
	jw_arr_begin(w);
}

int jw_error(struct jsonw *w)
{
	if (w->err || w->depth || w->key_pending || ferror(w->f))
		return -1;
	return 0;
}
