/*
 * test_util.c - the verbs' shared helpers (analyzer/util.c): byte counts as
 * people read them, from bytes to the largest unit, never in exponent form.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

Test(util, byte_counts_read_as_people_write_them)
{
	static const struct {
		uint64_t b;
		const char *want;
	} cases[] = {
	    {0, "0 B"},
	    {1023, "1023 B"},
	    {1024, "1 KiB"},
	    {1536, "1.5 KiB"},
	    {73728, "72 KiB"},
	    {1073741824ull - 65536, "1024 MiB"}, /* a trace file's full size: not 1.02e+03 MiB */
	    {1023ull << 20, "1023 MiB"},
	    {1ull << 30, "1 GiB"},
	    {5ull << 30, "5 GiB"},
	};
	char buf[32];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_expect_str_eq(util_fmt_bytes(cases[i].b, buf, sizeof(buf)), cases[i].want, "%llu bytes",
				 (unsigned long long)cases[i].b);
}

/* stepprof run -o PATTERN: each substitution where it stands, and each bad pattern one reason. */
Test(util, run_output_pattern_expands_pid_host_variables_and_percent)
{
	char out[64], err[256];
	setenv("SP_T_UTIL_JOB", "4242", 1);
	unsetenv("SP_T_UTIL_UNSET");
	cr_assert_eq(util_expand_output("p-%p/%h-%q{SP_T_UTIL_JOB}-%%", 77, "node1", out, sizeof(out), err,
					sizeof(err)),
		     0, "%s", err);
	cr_expect_str_eq(out, "p-77/node1-4242-%");
	cr_assert_eq(util_expand_output("plain/dir", 1, "h", out, sizeof(out), err, sizeof(err)), 0);
	cr_expect_str_eq(out, "plain/dir");
	cr_assert_eq(util_expand_output("%%p", 1, "h", out, sizeof(out), err, sizeof(err)), 0);
	cr_expect_str_eq(out, "%p", "%%%% then p is a '%%' and a 'p'");

	static const struct {
		const char *pat, *why;
	} bad[] = {
	    {"x-%q{SP_T_UTIL_UNSET}", "SP_T_UTIL_UNSET is not set"},
	    {"x-%q{}", "%q{VAR}"},
	    {"x-%qSP", "%q{VAR}"},
	    {"x-%q{SP_T_UTIL_JOB", "%q{VAR}"},
	    {"x-%z", "%z: not a substitution"},
	    {"x-%", "not a substitution"},
	    {"0123456789012345678901234567890123456789012345678901234567890123456789", "longer than 63"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		cr_expect_eq(util_expand_output(bad[i].pat, 1, "h", out, sizeof(out), err, sizeof(err)), -1, "%s",
			     bad[i].pat);
		cr_expect(strstr(err, bad[i].why), "%s: %s", bad[i].pat, err);
		cr_expect_null(strchr(err, '\n'));
	}
}

Test(util, the_header_cpu_affinity_reads_as_a_list_of_ranges)
{
	struct sp_file_header h;
	memset(&h, 0, sizeof(h));
	char out[64];
	cr_expect_str_eq(util_header_cpu_list(&h, out, sizeof(out)), "");
	h.cpu_affinity[0] = 0xfull | 1ull << 8 | 3ull << 10 | 1ull << 63;
	h.cpu_affinity[1] = 0x3;   /* 64, 65: a range across the word */
	h.cpu_affinity[15] = 1ull << 63;
	cr_expect_str_eq(util_header_cpu_list(&h, out, sizeof(out)), "0-3,8,10-11,63-65,1023");
	/* cut short, never past the buffer */
	memset(h.cpu_affinity, 0x55, sizeof(h.cpu_affinity)); /* every even CPU */
	util_header_cpu_list(&h, out, sizeof(out));
	cr_expect_lt(strlen(out), sizeof(out));
	cr_expect(strstr(out, "...") != NULL, "%s", out);
	cr_expect_eq(strncmp(out, "0,2,4,6", 7), 0, "%s", out);
}
