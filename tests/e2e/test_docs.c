/*
 * test_docs.c - what users read must describe what exists: every STEPPROF_*
 * variable of preload/config.def is in the README's table, and every record kind
 * and field of the trace format is in docs/trace-format.md.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepprof/trace.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	return buf;
}

Test(docs, readme_lists_every_config_variable)
{
	char *readme = slurp("README.md");
	static const char *const names[] = {
#define SP_CONFIG(name, type, dflt, help) "`STEPPROF_" #name "`",
#include "config.def"
#undef SP_CONFIG
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		cr_expect_not_null(strstr(readme, names[i]), "README.md does not document %s (run scripts/update-readme.sh)",
				   names[i]);
	free(readme);
}

Test(docs, trace_format_lists_every_kind_and_field)
{
	char *doc = slurp("docs/trace-format.md");
	char want[64];
	for (int k = 1; k < SP_K__COUNT; k++) {
		snprintf(want, sizeof(want), "`%s`", sp_kind_name[k]);
		cr_expect_not_null(strstr(doc, want), "docs/trace-format.md does not describe kind %s", want);
	}
	for (int f = 0; f < SP_F__COUNT; f++) {
		snprintf(want, sizeof(want), "`%s`", sp_field_name[f]);
		cr_expect_not_null(strstr(doc, want), "docs/trace-format.md does not describe field %s", want);
	}
	free(doc);
}
