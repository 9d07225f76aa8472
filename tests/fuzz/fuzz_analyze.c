/*
 * fuzz_analyze.c - libFuzzer target: the input bytes are one trace file, analysed
 * as `stepprof analyze FILE` does (cmd_analyze.c): merge_open over the one file,
 * an_analyze with the default options, then the text (--all), JSON and HTML
 * reports, written to /dev/null, and the damage line.
 *
 * Whatever the file holds, the analysis must end with a result or a one-line
 * error; a sanitizer report or a crash here is a bug in the analyzer.
 */
#include "fuzz_common.h"

#include <string.h>

#include "analyze.h"
#include "merge.h"
#include "report.h"
#include "report_html.h"

static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!devnull && !(devnull = fopen("/dev/null", "w")))
		abort();
	char path[64], err[512];
	int fd = fuzz_memfd(data, size, path, sizeof(path));
	if (fd < 0)
		return 0;
	char *paths[1] = {path};
	struct merge *m = merge_open(paths, 1);
	if (!m) {
		close(fd);
		return 0;
	}
	struct an_source src;
	merge_source(m, &src);
	struct an_options opt;
	an_options_init(&opt);
	struct an_analysis a;
	if (an_analyze(&src, &opt, &a, err, sizeof(err)) == 0) {
		merge_report_damage(m);
		report_text(devnull, &a, 1);
		report_json(devnull, &a);
		const char *const files[1] = {path};
		struct report_html_opts ho = {files, 1, 1};
		report_html(devnull, &a, &ho);
		an_analysis_free(&a);
	} else if (!err[0] || strchr(err, '\n')) {
		abort();
	}
	merge_close(m);
	close(fd);
	return 0;
}
