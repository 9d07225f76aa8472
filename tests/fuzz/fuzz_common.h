/*
 * fuzz_common.h - what both libFuzzer targets share: the input bytes as a file
 * the reader can open by path.
 *
 * The reader takes a path (it reopens files to rewind), so the bytes go to a
 * memfd, opened as /proc/self/fd/N: no disk traffic, nothing left behind.
 */
#ifndef STEPPROF_FUZZ_COMMON_H
#define STEPPROF_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* A memfd holding data; its path in path. -1 when the memfd cannot be made (then skip the input). */
static inline int fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t pathlen)
{
	int fd = memfd_create("stepprof-fuzz", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t off = 0;
	while (off < size) {
		ssize_t w = write(fd, data + off, size - off);
		if (w <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	snprintf(path, pathlen, "/proc/self/fd/%d", fd);
	return fd;
}

#endif /* STEPPROF_FUZZ_COMMON_H */
