/*
 * fuzz_summary.c - libFuzzer target: the input bytes are one rank summary, read
 * and merged as `stepprof merge FILE --json` does (rank_summary.c, the job's
 * report into memory).
 *
 * Whatever the bytes, the read must end with the job or with a one-line error
 * ("FILE:LINE: what", no newline in it). A sanitizer report or an abort here is
 * a bug in the reader or the matcher.
 */
#include "fuzz_common.h"

#include <string.h>

#include "rank_summary.h"
#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *in = fmemopen((void *)data, size, "r");
	if (!in)
		return 0;
	struct an_analysis a;
	memset(&a, 0, sizeof(a));
	an_options_init(&a.opt);
	char err[1024] = "";
	int rc = rs_read(in, "fuzz", &a, err, sizeof(err));
	fclose(in);
	if (rc) {
		if (!err[0] || strchr(err, '\n'))
			abort(); /* a refusal says why, on one line */
	} else {
		if (rs_finish(&a))
			abort(); /* only out of memory, which the fuzzer's limit does not reach here */
		char *doc = NULL;
		size_t len = 0;
		FILE *out = open_memstream(&doc, &len);
		if (!out)
			abort();
		if (report_job_json(out, &a) || fclose(out))
			abort();
		free(doc);
	}
	an_analysis_free(&a);
	return 0;
}
