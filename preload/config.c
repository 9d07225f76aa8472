/*
 * config.c - the preload's configuration: the STEPPROF_* variables it reads,
 * parsed from the real environment by libtrace's parser (envconfig.c), their
 * warnings said once each (see config.h).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sp_config sp_cfg;

/* --------------------------------------------------------------- loader */

static void keep_STR(const char **v)
{
	char *copy = *v ? strdup(*v) : NULL;
	if (copy)
		*v = copy;
}
#define keep_ENUM keep_STR
static void keep_INT(long long *v)
{
}
static void keep_BOOL(int *v)
{
}

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
 * so a bad value is said once, here, at start-up.
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
	sp_config_parse(&sp_cfg, SP_CFG_PRELOAD, real_get, collect);
	/* the values outlive the program's own changes of its environment */
#define SP_CONFIG(name, type, dflt, lo, hi, words, readers, help) keep_##type(&sp_cfg.name);
#include "config.def"
#undef SP_CONFIG
	/* warnings after the parse, so that a valid STEPPROF_QUIET=1 silences them all */
	for (int i = 0; i < nbad; i++)
		sp_warn_once(bad_keys[i], "%s", bad_msgs[i]);
}
