/*
 * test_config.c - the STEPPROF_* parser (libtrace/envconfig.c) on a fake
 * environment: defaults, valid values of each type, bad values (one warning
 * each, naming the variable, and the default kept), each program reading only
 * its own variables, and the help text agreeing with the bounds columns.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "config.h"

static const char *fake[16][2];
static int nwarn;
static char lastwarn[512];

static const char *get(const char *name)
{
	for (int i = 0; i < 16 && fake[i][0]; i++)
		if (strcmp(fake[i][0], name) == 0)
			return fake[i][1];
	return NULL;
}

static void warn(const char *var, const char *value, const char *expected)
{
	nwarn++;
	snprintf(lastwarn, sizeof(lastwarn), "%s=%s: %s", var, value, expected);
}

static int parse(struct sp_config *c, const char *const *kv)
{
	memset(fake, 0, sizeof(fake));
	for (int i = 0; kv && kv[2 * i]; i++) {
		fake[i][0] = kv[2 * i];
		fake[i][1] = kv[2 * i + 1];
	}
	nwarn = 0;
	lastwarn[0] = 0;
	memset(c, 0, sizeof(*c));
	return sp_config_parse(c, SP_CFG_PRELOAD | SP_CFG_RUN | SP_CFG_BPF, get, warn);
}

Test(config, defaults_without_environment)
{
	struct sp_config c;
	cr_assert_eq(parse(&c, NULL), 0);
	cr_expect_eq(nwarn, 0);
	cr_expect_str_eq(c.DIR, "");
	cr_expect_eq(c.MAX_MB, 1024);
	cr_expect_eq(c.DISABLE, 0);
	cr_expect_str_eq(c.KERNEL_TIMING, "auto");
	cr_expect_str_eq(c.IO, "auto");
	cr_expect_eq(c.SITES, 1);
	cr_expect_eq(c.QUIET, 0);
}

Test(config, valid_values_of_each_type)
{
	struct sp_config c;
	const char *kv[] = {"STEPPROF_DIR",
			    "/tmp/x y",
			    "STEPPROF_MAX_MB",
			    "4",
			    "STEPPROF_DISABLE",
			    "yes",
			    "STEPPROF_KERNEL_TIMING",
			    "16",
			    "STEPPROF_IO",
			    "bpf",
			    "STEPPROF_SITES",
			    "off",
			    "STEPPROF_QUIET",
			    "TRUE",
			    NULL};
	cr_assert_eq(parse(&c, kv), 0, "%s", lastwarn);
	cr_expect_str_eq(c.DIR, "/tmp/x y");
	cr_expect_eq(c.MAX_MB, 4);
	cr_expect_eq(c.DISABLE, 1);
	cr_expect_str_eq(c.KERNEL_TIMING, "16");
	cr_expect_str_eq(c.IO, "bpf");
	cr_expect_eq(c.SITES, 0);
	cr_expect_eq(c.QUIET, 1);
	const char *kv2[] = {"STEPPROF_MAX_MB", "1048576", "STEPPROF_KERNEL_TIMING", "off", NULL};
	cr_assert_eq(parse(&c, kv2), 0, "%s", lastwarn);
	cr_expect_eq(c.MAX_MB, 1048576);
	cr_expect_str_eq(c.KERNEL_TIMING, "off");
}

Test(config, bad_values_warn_once_each_and_keep_defaults)
{
	struct sp_config c;
	const char *kv[] = {"STEPPROF_MAX_MB",
			    "lots",
			    "STEPPROF_DISABLE",
			    "maybe",
			    "STEPPROF_KERNEL_TIMING",
			    "0",
			    "STEPPROF_IO",
			    "nfs",
			    NULL};
	cr_expect_eq(parse(&c, kv), 4);
	cr_expect_eq(nwarn, 4);
	cr_expect_eq(c.MAX_MB, 1024);
	cr_expect_eq(c.DISABLE, 0);
	cr_expect_str_eq(c.KERNEL_TIMING, "auto");
	cr_expect_str_eq(c.IO, "auto");
	cr_expect(strstr(lastwarn, "STEPPROF_IO=nfs") && strstr(lastwarn, "auto|libc|bpf|off"), "%s", lastwarn);
}

Test(config, integer_bounds_come_from_their_column)
{
	struct sp_config c;
	const char *lo[] = {"STEPPROF_MAX_MB", "3", NULL}, *hi[] = {"STEPPROF_MAX_MB", "1048577", NULL},
		   *neg[] = {"STEPPROF_MAX_MB", "-5", NULL}, *trail[] = {"STEPPROF_MAX_MB", "64M", NULL};
	cr_expect_eq(parse(&c, lo), 1);
	cr_expect(strstr(lastwarn, "4..1048576"), "%s", lastwarn);
	cr_expect_eq(parse(&c, hi), 1);
	cr_expect_eq(parse(&c, neg), 1);
	cr_expect_eq(parse(&c, trail), 1);
	cr_expect_eq(c.MAX_MB, 1024);
}

Test(config, enum_number_word_takes_positive_integers_only)
{
	struct sp_config c;
	const char *neg[] = {"STEPPROF_KERNEL_TIMING", "-3", NULL}, *word[] = {"STEPPROF_KERNEL_TIMING", "N", NULL},
		   *empty[] = {"STEPPROF_KERNEL_TIMING", "", NULL};
	cr_expect_eq(parse(&c, neg), 1);
	cr_expect_eq(parse(&c, word), 1, "the letter N itself is not a number");
	cr_expect_eq(parse(&c, empty), 1);
	cr_expect_str_eq(c.KERNEL_TIMING, "auto");
}

/* Each program parses its own variables: the others keep their default, silently. */
Test(config, each_reader_parses_only_its_own_variables)
{
	struct sp_config c;
	const char *kv[] = {"STEPPROF_ATTACH_S", "0", "STEPPROF_KERNEL_TIMING", "off", "STEPPROF_LIB", "/x.so", NULL};
	memset(fake, 0, sizeof(fake));
	for (int i = 0; kv[2 * i]; i++)
		fake[i][0] = kv[2 * i], fake[i][1] = kv[2 * i + 1];
	nwarn = 0;
	cr_expect_eq(sp_config_parse(&c, SP_CFG_PRELOAD, get, warn), 0, "the preload does not read ATTACH_S");
	cr_expect_str_eq(c.KERNEL_TIMING, "off");
	cr_expect_str_eq(c.LIB, "");
	cr_expect_eq(c.ATTACH_S, 30);
	cr_expect_eq(sp_config_parse(&c, SP_CFG_RUN, get, warn), 1, "run reads ATTACH_S: 0 is out of 1..3600");
	cr_expect_eq(nwarn, 1);
	cr_expect(strstr(lastwarn, "STEPPROF_ATTACH_S=0") && strstr(lastwarn, "1..3600"), "%s", lastwarn);
	cr_expect_str_eq(c.KERNEL_TIMING, "auto", "run does not read KERNEL_TIMING");
	cr_expect_str_eq(c.LIB, "/x.so");
}

/* The README's meaning column says the same bounds and words as the parser's columns. */
Test(config, help_text_states_the_bounds_and_words_of_the_columns)
{
	static const struct {
		const char *name, *type;
		long long lo, hi;
		const char *words, *help;
	} vars[] = {
#define SP_CONFIG(name, type, dflt, lo, hi, words, readers, help) {#name, #type, lo, hi, words, help},
#include "config.def"
#undef SP_CONFIG
	};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		char want[160] = "";
		if (!strcmp(vars[i].type, "INT"))
			snprintf(want, sizeof(want), "(%lld..%lld)", vars[i].lo, vars[i].hi);
		else if (!strcmp(vars[i].type, "ENUM"))
			snprintf(want, sizeof(want), "(%s)", vars[i].words);
		else
			cr_expect(vars[i].lo == 0 && vars[i].hi == 0 && !*vars[i].words, "%s: bounds on a %s",
				  vars[i].name, vars[i].type);
		if (*want)
			cr_expect_not_null(strstr(vars[i].help, want), "STEPPROF_%s's help lacks %s: %s", vars[i].name,
					   want, vars[i].help);
	}
}

/* An ENUM word ending in A-B (STEPPROF_CAPTURE's steps:A-B): its prefix, then two decimals A < B. */
Test(config, enum_range_word_takes_two_increasing_decimals)
{
	static const char *const good[] = {"all", "cudaProfilerApi", "steps:10-20", "steps:0-1", "steps:7-1000000"};
	static const char *const bad[] = {"steps:20-10", "steps:10-10", "steps:10",     "steps:+1-5", "steps: 1-5",
					  "steps:1-5x",  "steps:1--5",  "steps:",	"steps:A-B",  "1-5",
					  "Steps:1-5",   "cudaprofilerapi", "steps:1-99999999999999999999999"};
	struct sp_config c;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		const char *kv[] = {"STEPPROF_CAPTURE", good[i], NULL};
		cr_expect_eq(parse(&c, kv), 0, "%s refused: %s", good[i], lastwarn);
		cr_expect_str_eq(c.CAPTURE, good[i]);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *kv[] = {"STEPPROF_CAPTURE", bad[i], NULL};
		cr_expect_eq(parse(&c, kv), 1, "%s accepted", bad[i]);
		cr_expect_eq(nwarn, 1);
		cr_expect(strstr(lastwarn, "STEPPROF_CAPTURE") && strstr(lastwarn, "steps:A-B"), "%s", lastwarn);
		cr_expect_str_eq(c.CAPTURE, "all");
	}
}
