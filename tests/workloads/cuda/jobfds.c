/*
 * jobfds.c - a job that owns the low descriptor numbers: after a first CUDA
 * call (the preload has started: trace file, call sites), it closes every
 * descriptor above 2, opens its own files at the lowest numbers (3: an input
 * it reads, 4: an output it writes), makes CUDA calls from a frame without
 * unwind info (jobfds_noinfo.c), then copies the input to the output with one
 * read and one write, and prints the descriptors it holds ("fds: 0 1 2 3 4").
 *
 *   jobfds IN OUT [--keep-fds]
 *
 * --keep-fds: no descriptor is closed, the files open wherever they can; the
 * line shows every descriptor the process holds at its end.
 */
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int jobfds_noinfo_calls(void);

static void *alloc(size_t n)
{
	void *d = NULL;
	return cudaMalloc(&d, n) == cudaSuccess ? d : NULL;
}

static char host[4096];

static int copy(void *d, size_t n)
{
	return cudaMemcpy(d, host, n, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
}

int main(int argc, char **argv)
{
	int keep = argc == 4 && !strcmp(argv[3], "--keep-fds");
	if (argc != 3 && !keep) {
		fprintf(stderr, "usage: jobfds IN OUT [--keep-fds]\n");
		return 2;
	}
	void *first = alloc(4096);
	if (!first || copy(first, 64) != 0)
		return 3;
	for (int fd = 3; fd < 1024 && !keep; fd++)
		close(fd);
	int in = open(argv[1], O_RDONLY);
	int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (in < 0 || out < 0 || (!keep && (in != 3 || out != 4))) {
		fprintf(stderr, "jobfds: got fds %d and %d\n", in, out);
		return 4;
	}
	if (jobfds_noinfo_calls() != 0)
		return 5;
	static char buf[65536];
	ssize_t n = read(in, buf, sizeof(buf));
	if (n < 0 || write(out, buf, (size_t)n) != n)
		return 6;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return 7;
	int own = dirfd(d);
	printf("fds:");
	struct dirent *e;
	int fds[64], nfds = 0;
	while ((e = readdir(d)) && nfds < 64)
		if (e->d_name[0] != '.' && atoi(e->d_name) != own)
			fds[nfds++] = atoi(e->d_name);
	closedir(d);
	for (int i = 0; i < nfds; i++) /* sorted for a stable line */
		for (int j = i + 1; j < nfds; j++)
			if (fds[j] < fds[i]) {
				int t = fds[i];
				fds[i] = fds[j];
				fds[j] = t;
			}
	for (int i = 0; i < nfds; i++)
		printf(" %d", fds[i]);
	printf("\n");
	return 0;
}
