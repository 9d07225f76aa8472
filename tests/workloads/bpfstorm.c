/*
 * bpfstorm.c - a storm of traced calls, for the eBPF collector's lost-event tests.
 *
 *   bpfstorm NPROC NREADS
 *
 * Forks NPROC children; each opens /dev/zero, reads it NREADS times one byte
 * at a time, closes it and exits with _exit (no stdio: exactly NREADS + 2
 * traced calls, open, reads and close, none other). The parent waits for them
 * and prints {"procs": NPROC, "reads": NREADS}; exits 1 when a child failed.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: bpfstorm NPROC NREADS\n");
		return 2;
	}
	int nproc = atoi(argv[1]);
	long nreads = atol(argv[2]);
	for (int i = 0; i < nproc; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			char c;
			int fd = open("/dev/zero", O_RDONLY);
			if (fd < 0)
				_exit(1);
			for (long k = 0; k < nreads; k++)
				if (read(fd, &c, 1) != 1)
					_exit(1);
			_exit(close(fd) ? 1 : 0);
		}
	}
	int status, failed = 0;
	while (wait(&status) > 0)
		failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	printf("{\"procs\": %d, \"reads\": %ld}\n", nproc, nreads);
	return failed;
}
