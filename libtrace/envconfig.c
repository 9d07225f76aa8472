/*
 * envconfig.c - parse the STEPPROF_* variables of preload/config.def (see
 * envconfig.h): the value checkers per type (STR, INT, BOOL, ENUM), then the
 * X-macro driven parser. Bounds and words come from config.def's columns.
 */
#include "envconfig.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int parse_ll(const char *v, long long *out)
{
	if (!*v)
		return -1;
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno || *end || !(isdigit((unsigned char)v[0]) || v[0] == '-' || v[0] == '+'))
		return -1;
	*out = x;
	return 0;
}

static int check_INT(const char *v, long long lo, long long hi, const char *words, sp_cfg_INT *out, char *expect,
		     size_t n)
{
	long long x;
	snprintf(expect, n, "an integer in %lld..%lld", lo, hi);
	if (parse_ll(v, &x) != 0 || x < lo || x > hi)
		return -1;
	*out = x;
	return 0;
}

static int check_BOOL(const char *v, long long lo, long long hi, const char *words, sp_cfg_BOOL *out, char *expect,
		      size_t n)
{
	static const char *const yes[] = {"1", "yes", "on", "true"}, *const no[] = {"0", "no", "off", "false"};
	snprintf(expect, n, "0/1, yes/no, on/off or true/false");
	for (unsigned i = 0; i < 4; i++) {
		if (strcasecmp(v, yes[i]) == 0)
			return *out = 1, 0;
		if (strcasecmp(v, no[i]) == 0)
			return *out = 0, 0;
	}
	return -1;
}

/*
 * v is prefix (plen bytes) followed by "A-B": two decimal numbers, A < B, digits
 * only (no sign, no space).
 */
static int is_range(const char *v, const char *prefix, size_t plen)
{
	if (strncmp(v, prefix, plen) != 0)
		return 0;
	const char *p = v + plen;
	unsigned long long a, b;
	char *end;
	if (!isdigit((unsigned char)p[0]))
		return 0;
	errno = 0;
	a = strtoull(p, &end, 10);
	if (errno || *end != '-' || !isdigit((unsigned char)end[1]))
		return 0;
	b = strtoull(end + 1, &end, 10);
	return !errno && !*end && a < b;
}

/*
 * One of the '|'-separated words (the word N: a positive decimal number; a
 * word ending in A-B: its prefix, then two decimal numbers A < B).
 */
static int check_ENUM(const char *v, long long lo, long long hi, const char *words, sp_cfg_ENUM *out, char *expect,
		      size_t n)
{
	snprintf(expect, n, "one of %s", words);
	for (const char *w = words; *w;) {
		size_t len = strcspn(w, "|");
		long long x;
		int number = len == 1 && w[0] == 'N';
		int range = len >= 3 && strncmp(w + len - 3, "A-B", 3) == 0;
		if ((!number && !range && strlen(v) == len && strncmp(w, v, len) == 0) ||
		    (number && parse_ll(v, &x) == 0 && x > 0 && v[0] != '+') || (range && is_range(v, w, len - 3))) {
			*out = v;
			return 0;
		}
		w += len + (w[len] == '|');
	}
	return -1;
}

static int check_STR(const char *v, long long lo, long long hi, const char *words, sp_cfg_STR *out, char *expect,
		     size_t n)
{
	*out = v;
	return 0;
}

int sp_config_parse(struct sp_config *c, unsigned readers, const char *(*get)(const char *name),
		    sp_config_warn_fn warn)
{
	int bad = 0;
	char expect[160];
	const char *v;
#define SP_CONFIG(name, type, dflt, lo, hi, words, who, help)                                                          \
	check_##type(dflt, lo, hi, words, &c->name, expect, sizeof(expect));                                           \
	v = ((who) & readers) ? get("STEPPROF_" #name) : NULL;                                                         \
	if (v && check_##type(v, lo, hi, words, &c->name, expect, sizeof(expect)) != 0) {                              \
		check_##type(dflt, lo, hi, words, &c->name, expect, sizeof(expect));                                   \
		bad++;                                                                                                 \
		if (warn)                                                                                              \
			warn("STEPPROF_" #name, v, expect);                                                            \
	}
#include "../preload/config.def" /* the list lives with the preload, its main reader */
#undef SP_CONFIG
	return bad;
}
