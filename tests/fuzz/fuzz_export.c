/*
 * fuzz_export.c - libFuzzer target: the input bytes are one trace file, exported
 * as `stepprof export FILE -o -` does (export_perfetto.c) into memory.
 *
 * Whatever the file holds, the export must end with a document or a one-line
 * error, and a slice never has a negative duration (Perfetto drops or misplaces
 * it; a string holding the same characters is escaped, \"dur\", so it cannot
 * match). A sanitizer report or an abort here is a bug in the exporter.
 */
#include "fuzz_common.h"

#include <string.h>

#include "export_perfetto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_memfd(data, size, path, sizeof(path));
	if (fd < 0)
		return 0;
	char *doc = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&doc, &len);
	if (!out)
		abort();
	char *paths[1] = {path};
	struct export_stats st;
	export_perfetto(paths, 1, out, NULL, &st);
	if (fclose(out))
		abort();
	if (memmem(doc, len, "\"dur\":-", 7))
		abort();
	free(doc);
	close(fd);
	return 0;
}
