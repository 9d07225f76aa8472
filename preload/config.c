/*
 * config.c - parse the STEPPROF_* variables of config.def (see config.h).
 *
 * Divided into: the value checkers per type (STR, INT, BOOL, ENUM); the
 * X-macro driven parser; the loader for the real environment.
 *
 * Bounds of an INT and the words of an ENUM are read from the first
 * parenthesis of the variable's help text, so config.def stays the one place
 * where a variable is described (the README's table is generated from it).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sp_config sp_cfg = {
#define SP_CONFIG(name, type, dflt, help) .name = (sp_cfg_##type)0,
#include "config.def"
#undef SP_CONFIG
};

/* ------------------------------------------------------------ checkers */

/* The text inside the help's first parenthesis, into buf; "" when none. */
static void paren(const char *help, char *buf, size_t n)
{
	buf[0] = 0;
	const char *a = strchr(help, '(');
	const char *b = a ? strchr(a, ')') : NULL;
	if (!a || !b || (size_t)(b - a - 1) >= n)
		return;
	memcpy(buf, a + 1, (size_t)(b - a - 1));
	buf[b - a - 1] = 0;
}

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

static int check_INT(const char *v, const char *help, sp_cfg_INT *out, char *expect, size_t n)
{
	char p[128];
	long long lo = 0, hi = 0x7fffffffffffffffll, x;
	paren(help, p, sizeof(p));
	if (sscanf(p, "%lld..%lld", &lo, &hi) != 2)
		lo = 0, hi = 0x7fffffffffffffffll;
	snprintf(expect, n, "an integer in %lld..%lld", lo, hi);
	if (parse_ll(v, &x) != 0 || x < lo || x > hi)
		return -1;
	*out = x;
	return 0;
}

static int check_BOOL(const char *v, const char *help, sp_cfg_BOOL *out, char *expect, size_t n)
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

static int check_ENUM(const char *v, const char *help, sp_cfg_ENUM *out, char *expect, size_t n)
{
	char p[128];
	paren(help, p, sizeof(p));
	snprintf(expect, n, "one of %s", p);
	/* strtok_r: strtok's hidden state is the program's, and this runs in its process */
	char *save = NULL;
	for (char *w = strtok_r(p, "|", &save); w; w = strtok_r(NULL, "|", &save)) {
		long long x;
		int number = strcmp(w, "N") == 0;
		if ((!number && strcmp(w, v) == 0) || (number && parse_ll(v, &x) == 0 && x > 0 && v[0] != '+')) {
			*out = strdup(v);
			return *out ? 0 : -1;
		}
	}
	return -1;
}

static int check_STR(const char *v, const char *help, sp_cfg_STR *out, char *expect, size_t n)
{
	*out = strdup(v);
	return *out ? 0 : -1;
}

/* --------------------------------------------------------------- parser */

int sp_config_parse(struct sp_config *c, const char *(*get)(const char *name), sp_config_warn_fn warn)
{
	int bad = 0;
	char expect[160];
	const char *v;
#define SP_CONFIG(name, type, dflt, help)                                                                              \
	check_##type(dflt, help, &c->name, expect, sizeof(expect));                                                    \
	v = get("STEPPROF_" #name);                                                                                    \
	if (v && check_##type(v, help, &c->name, expect, sizeof(expect)) != 0) {                                       \
		check_##type(dflt, help, &c->name, expect, sizeof(expect));                                            \
		bad++;                                                                                                 \
		if (warn)                                                                                              \
			warn("STEPPROF_" #name, v, expect);                                                            \
	}
#include "config.def"
#undef SP_CONFIG
	return bad;
}

/* --------------------------------------------------------------- loader */

static const char *real_get(const char *name)
{
	return getenv(name);
}

#define MAX_BAD 16
static char bad_msgs[MAX_BAD][256];
static char bad_keys[MAX_BAD][32];
static int nbad;

/*
 * The warning's key (sp_warn_once): the variable's name in lower case without
 * STEPPROF_, "kernel_timing" for STEPPROF_KERNEL_TIMING. RATIONALE: a module
 * that checks its variable again where it uses it warns under that same key,
 * so a bad value is said once, here, at start-up (before, STEPPROF_KERNEL_TIMING
 * twice: design.md §3; cuda_gpu.c now takes sp_cfg's value).
 */
static void warn_key(const char *var, char *key, size_t n)
{
	size_t skip = strlen("STEPPROF_"), i = 0;
	for (const char *p = var + skip; *p && i + 1 < n; p++)
		key[i++] = (char)tolower((unsigned char)*p);
	key[i] = 0;
}

static void collect(const char *var, const char *value, const char *expected)
{
	if (nbad >= MAX_BAD)
		return;
	warn_key(var, bad_keys[nbad], sizeof(bad_keys[0]));
	snprintf(bad_msgs[nbad++], sizeof(bad_msgs[0]), "%s=\"%.80s\" is not valid (expected %s); using the default",
		 var, value, expected);
}

void sp_config_load(void)
{
	nbad = 0;
	sp_config_parse(&sp_cfg, real_get, collect);
	/* warnings after the parse, so that a valid STEPPROF_QUIET=1 silences them all */
	for (int i = 0; i < nbad; i++)
		sp_warn_once(bad_keys[i], "%s", bad_msgs[i]);
}
