/*
 * test_util.c - the verbs' shared helpers (analyzer/util.c): byte counts as
 * people read them, from bytes to the largest unit, never in exponent form.
 */
#include <criterion/criterion.h>
#include <stdint.h>

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
