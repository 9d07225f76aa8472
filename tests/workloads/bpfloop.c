/*
 * bpfloop.c - the small-file loop of the eBPF collector's benchmark.
 *
 *   bpfloop DIR NFILES OPS
 *
 * Makes NFILES files of 4 KiB in DIR when they are missing (not timed), reads
 * each once to have them in the page cache, then times OPS rounds of
 * stat + open + read 4 KiB + close, cycling over the files, and prints
 *   ns_per_op <n>
 * The figure is the loop's own CLOCK_MONOTONIC time, so process start-up and
 * the set-up are not in it (the collector's start is not either).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FILE_BYTES 4096

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	static char buf[FILE_BYTES];
	char path[4096];
	struct stat st;

	if (argc != 4) {
		fprintf(stderr, "usage: bpfloop DIR NFILES OPS\n");
		return 2;
	}
	const char *dir = argv[1];
	int nfiles = atoi(argv[2]);
	long ops = atol(argv[3]);
	if (nfiles <= 0 || ops <= 0) {
		fprintf(stderr, "bpfloop: NFILES and OPS must be positive\n");
		return 2;
	}

	for (int i = 0; i < nfiles; i++) {
		snprintf(path, sizeof(path), "%s/s%d", dir, i);
		int fd = open(path, O_RDONLY);
		if (fd < 0) {
			for (int k = 0; k < FILE_BYTES; k++)
				buf[k] = (char)('a' + k % 26);
			fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd < 0 || write(fd, buf, FILE_BYTES) != FILE_BYTES) {
				fprintf(stderr, "bpfloop: cannot create %s\n", path);
				return 1;
			}
			close(fd);
			fd = open(path, O_RDONLY);
		}
		if (fd < 0 || read(fd, buf, FILE_BYTES) != FILE_BYTES) {
			fprintf(stderr, "bpfloop: cannot read %s\n", path);
			return 1;
		}
		close(fd);
	}

	long bytes = 0;
	double t0 = now_s(), c0 = cpu_s();
	for (long op = 0; op < ops; op++) {
		snprintf(path, sizeof(path), "%s/s%ld", dir, op % nfiles);
		if (stat(path, &st))
			return 1;
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			return 1;
		bytes += read(fd, buf, FILE_BYTES);
		close(fd);
	}
	double t = now_s() - t0, c = cpu_s() - c0;
	if (bytes != (long)FILE_BYTES * ops) {
		fprintf(stderr, "bpfloop: short reads\n");
		return 1;
	}
	printf("ns_per_op %.0f cpu_ns_per_op %.0f\n", t * 1e9 / (double)ops, c * 1e9 / (double)ops);
	return 0;
}
