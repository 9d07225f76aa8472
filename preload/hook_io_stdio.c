/*
 * hook_io_stdio.c - stdio reads, which go through the stream's buffer: fread,
 * fgets, getline/getdelim, fgetc/getc, fscanf/vfscanf (every _unlocked, _chk
 * and __isoc99_ name glibc exports), and __uflow/__underflow, which the
 * getc_unlocked macro calls when the buffer is empty.
 *
 * glibc refills a stream's buffer (or reads a large fread straight into the
 * program's memory) with its internal read, which no wrapper of read() sees,
 * and a call that finds its data buffered reads nothing from the file. A
 * record's bytes are what the call read from the file, by conservation: the
 * bytes it took from the stream, minus those that were buffered before it,
 * plus those it left buffered (the read pointers before and after the call,
 * never dereferenced). So the records of a file read to its end sum to its
 * size whichever functions read it, one after the other on one stream (a
 * header line by fgets, then the body by fread), and they agree with the
 * eBPF collector's, which sees the read() calls themselves. Recording what the
 * program receives would be wrong: fread(100) of a 1,000-byte file reads 1,000 bytes
 * from it, and a later fread served from the buffer reads none.
 *
 * fread is one record per call (0 bytes when served from the buffer). The
 * others are called per line or per character: a call is recorded only when
 * it read from the file, i.e. refilled the buffer: the buffer moved or was
 * refilled in place (its end or base changed, or the read pointer went back),
 * or the call took more than was buffered. A text file read line by line is
 * then one record per buffer (4 KiB on most file systems: st_blksize); the
 * refill that meets the end of the file (glibc resets the pointers, then reads
 * nothing) is a record of 0 bytes, as the last read() of a loop is. fscanf does
 * not say what it took: its record holds the buffer's content (one refill). A
 * call that set the stream's error flag is recorded with its errno.
 *
 * The clock is read only for a call that may refill: fgetc/getc/__uflow when
 * the buffer is empty, fgets/getline when the rest of the buffer holds no end
 * of line (memchr), fread and fscanf always. A loop of fgetc over a buffered
 * file costs a few instructions a character.
 *
 * RATIONALE: the pointers are read without the stream's lock: a stream used by
 * two threads at once may be misjudged (a record too many or too few, bytes
 * off), never crashed on, as nothing is read through them.
 */
#include "io_hook.h"

#include <stdarg.h>
#include <sys/types.h>

/* Not declared by <stdio.h>, or only under some feature macros. */
int __uflow(FILE *fp);
int __underflow(FILE *fp);
int _IO_getc(FILE *fp);
ssize_t __getdelim(char **line, size_t *n, int delim, FILE *fp);
char *__fgets_chk(char *s, size_t size, int n, FILE *fp);
char *__fgets_unlocked_chk(char *s, size_t size, int n, FILE *fp);
int __isoc99_fscanf(FILE *fp, const char *fmt, ...);
int __isoc99_vfscanf(FILE *fp, const char *fmt, va_list ap);

/* NOTE: <stdio.h> may define these as macros when optimising. */
#undef getc
#undef getc_unlocked
#undef fgetc_unlocked
#undef fgets_unlocked

#define IO_FLAG_ERR 0x20 /* glibc's _IO_ERR_SEEN */

/* The wrappers below are the exported names (the version script lists them). */
#pragma GCC visibility push(default)

/* The stream's read state before the call. */
struct io_stdio {
	const char *ptr, *end, *base;
	int err;
};

/* 1 = record this call if it refills (start time taken), 0 = just forward. */
IO_INLINE int stdio_begin(FILE *fp, struct io_call *c, struct io_stdio *s)
{
	if (io_file_fd(fp) < 0 || !io_begin(c))
		return 0;
	s->ptr = fp->_IO_read_ptr;
	s->end = fp->_IO_read_end;
	s->base = fp->_IO_read_base;
	s->err = fp->_flags & IO_FLAG_ERR;
	return 1;
}

/* Bytes buffered from ptr on. */
static inline size_t stdio_avail(const FILE *fp)
{
	return fp->_IO_read_end > fp->_IO_read_ptr ? (size_t)(fp->_IO_read_end - fp->_IO_read_ptr) : 0;
}

/* What the call read from the file, having taken `took` bytes from the stream (-1: unknown). */
static long stdio_file_bytes(const FILE *fp, const struct io_stdio *s, long took)
{
	const char *ptr = fp->_IO_read_ptr, *end = fp->_IO_read_end, *base = fp->_IO_read_base;
	if (took < 0) /* one refill: the buffer's content */
		return end > base ? end - base : 0;
	long avail = s->end > s->ptr ? s->end - s->ptr : 0, left = end > ptr ? end - ptr : 0;
	long got = took - avail + left;
	return got > 0 ? got : 0;
}

/* The call read from the file (or tried to: the end of file resets the pointers). */
static int stdio_refilled(const FILE *fp, const struct io_stdio *s, long took)
{
	long avail = s->end > s->ptr ? s->end - s->ptr : 0;
	return fp->_IO_read_end != s->end || fp->_IO_read_base != s->base || fp->_IO_read_ptr < s->ptr ||
	       (took >= 0 && took > avail);
}

/* After a per-line or per-character call: its record if it refilled the buffer or failed, then finish. */
static void stdio_end(struct io_call *c, unsigned api, FILE *fp, const struct io_stdio *s, long took)
{
	int failed = (fp->_flags & IO_FLAG_ERR) && !s->err;
	if (!failed && !stdio_refilled(fp, s, took)) {
		io_finish(c);
		return;
	}
	long got = failed ? -1 : stdio_file_bytes(fp, s, took);
	io_end(c, got);
	io_rec_read(c, api, fp->_fileno, got);
}

/* ------------------------------------------------------------------ fread */

/*
 * One record per call: what it read from the file (above), -1 when nothing
 * was read because of a stream error. A stream without an fd (fmemopen,
 * open_memstream) is memory, not input: stdio_begin says whether to record.
 */
static size_t fread_end(struct io_call *c, unsigned api, FILE *fp, const struct io_stdio *s, size_t size, size_t r)
{
	long got = r == 0 && ferror_unlocked(fp) ? -1 : stdio_file_bytes(fp, s, (long)(r * size));
	io_end(c, got);
	io_rec_read(c, api, fp->_fileno, got);
	return r;
}

/* NOTE: <stdio.h> may define fread_unlocked as a macro when optimising. */
#undef fread_unlocked

size_t __fread_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp);
size_t __fread_unlocked_chk(void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp);

#define STDIO_FREAD(NAME, PARAMS, ARGS)                                                                                \
	size_t NAME PARAMS                                                                                             \
	{                                                                                                              \
		__typeof__(&NAME) real = IO_REAL(NAME);                                                                \
		struct io_call c;                                                                                      \
		struct io_stdio st;                                                                                    \
		if (!stdio_begin(fp, &c, &st))                                                                         \
			return real ARGS;                                                                              \
		return fread_end(&c, SP_API_##NAME, fp, &st, size, real ARGS);                                         \
	}

STDIO_FREAD(fread, (void *ptr, size_t size, size_t n, FILE *fp), (ptr, size, n, fp))
STDIO_FREAD(fread_unlocked, (void *ptr, size_t size, size_t n, FILE *fp), (ptr, size, n, fp))
STDIO_FREAD(__fread_chk, (void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp), (ptr, ptrlen, size, n, fp))
STDIO_FREAD(__fread_unlocked_chk, (void *ptr, size_t ptrlen, size_t size, size_t n, FILE *fp),
	    (ptr, ptrlen, size, n, fp))

/* -------------------------------------------------- characters: fgetc, getc */

/*
 * A character read can refill only an empty buffer. RATIONALE: two functions,
 * as the CUDA wrappers are: the exported front tests the buffer and jumps to
 * libc's function, with no frame; NAME__rec, out of line, records (with the
 * frame in its own, the front saved four registers and built a frame before
 * its test: fgetc over a buffered file 3.1 -> 4.4 ns a character, 3.7 now).
 */
#define STDIO_CHAR(NAME, TAKES)                                                                                        \
	static __attribute__((noinline)) int NAME##__rec(FILE *fp)                                                     \
	{                                                                                                              \
		int (*real)(FILE *) = IO_REAL(NAME);                                                                   \
		struct io_call c;                                                                                      \
		struct io_stdio s;                                                                                     \
		if (!stdio_begin(fp, &c, &s))                                                                          \
			return real(fp);                                                                               \
		int r = real(fp);                                                                                      \
		stdio_end(&c, SP_API_##NAME, fp, &s, r == EOF ? 0 : (TAKES));                                          \
		return r;                                                                                              \
	}                                                                                                              \
	int NAME(FILE *fp)                                                                                             \
	{                                                                                                              \
		if (__builtin_expect(fp && fp->_IO_read_ptr < fp->_IO_read_end, 1))                                    \
			return IO_REAL(NAME)(fp);                                                                      \
		return NAME##__rec(fp);                                                                                \
	}

/* the character they return is taken from the stream, but __underflow's is left there */
STDIO_CHAR(fgetc, 1)
STDIO_CHAR(getc, 1)
STDIO_CHAR(_IO_getc, 1)
STDIO_CHAR(fgetc_unlocked, 1)
STDIO_CHAR(getc_unlocked, 1)
STDIO_CHAR(__uflow, 1)
STDIO_CHAR(__underflow, 0)

/* ------------------------------------------------------------ lines: fgets */

/* The rest of the buffer holds the end of a line of at most max bytes: no refill. */
static inline int stdio_line_buffered(FILE *fp, int delim, size_t max)
{
	size_t avail = fp ? stdio_avail(fp) : 0;
	if (avail > max)
		avail = max;
	return avail && memchr(fp->_IO_read_ptr, delim, avail) != NULL;
}

#define STDIO_FGETS(NAME, PARAMS, ARGS)                                                                                \
	char *NAME PARAMS                                                                                              \
	{                                                                                                              \
		__typeof__(&NAME) real = IO_REAL(NAME);                                                                \
		struct io_call c;                                                                                      \
		struct io_stdio st;                                                                                    \
		if (n <= 1 || stdio_line_buffered(fp, '\n', (size_t)n - 1) || !stdio_begin(fp, &c, &st))              \
			return real ARGS;                                                                              \
		char *r = real ARGS;                                                                                   \
		stdio_end(&c, SP_API_##NAME, fp, &st, r ? (long)strnlen(r, (size_t)n - 1) : 0);                       \
		return r;                                                                                              \
	}

STDIO_FGETS(fgets, (char *s, int n, FILE *fp), (s, n, fp))
STDIO_FGETS(fgets_unlocked, (char *s, int n, FILE *fp), (s, n, fp))
STDIO_FGETS(__fgets_chk, (char *s, size_t size, int n, FILE *fp), (s, size, n, fp))
STDIO_FGETS(__fgets_unlocked_chk, (char *s, size_t size, int n, FILE *fp), (s, size, n, fp))

/* -------------------------------------------------- lines: getline, getdelim */

#define STDIO_GETDELIM(NAME, PARAMS, ARGS, DELIM)                                                                      \
	ssize_t NAME PARAMS                                                                                            \
	{                                                                                                              \
		__typeof__(&NAME) real = IO_REAL(NAME);                                                                \
		struct io_call c;                                                                                      \
		struct io_stdio st;                                                                                    \
		if (stdio_line_buffered(fp, (DELIM), SIZE_MAX) || !stdio_begin(fp, &c, &st))                          \
			return real ARGS;                                                                              \
		ssize_t r = real ARGS;                                                                                 \
		stdio_end(&c, SP_API_##NAME, fp, &st, r > 0 ? (long)r : 0);                                           \
		return r;                                                                                              \
	}

STDIO_GETDELIM(getline, (char **line, size_t *n, FILE *fp), (line, n, fp), '\n')
STDIO_GETDELIM(getdelim, (char **line, size_t *n, int delim, FILE *fp), (line, n, delim, fp), delim)
STDIO_GETDELIM(__getdelim, (char **line, size_t *n, int delim, FILE *fp), (line, n, delim, fp), delim)

/* ------------------------------------------------------ formatted: fscanf */

/*
 * NOTE: <stdio.h> redirects fscanf and vfscanf to their __isoc99_ names in C99
 * and later (an asm label): the plain names are defined here under C names of
 * their own with the symbol given by an asm label, and each resolves the libc
 * function of its own symbol (io_real.c looks the def's name up).
 */
int sp_io_vfscanf(FILE *fp, const char *fmt, va_list ap) __asm__("vfscanf");
int sp_io_fscanf(FILE *fp, const char *fmt, ...) __asm__("fscanf");

#define STDIO_VSCANF(CNAME, NAME)                                                                                      \
	int CNAME(FILE *fp, const char *fmt, va_list ap)                                                               \
	{                                                                                                              \
		int (*real)(FILE *, const char *, va_list) =                                                           \
			(int (*)(FILE *, const char *, va_list))io_real_get(IO_FN_##NAME);                            \
		struct io_call c;                                                                                      \
		struct io_stdio st;                                                                                    \
		if (!stdio_begin(fp, &c, &st))                                                                         \
			return real(fp, fmt, ap);                                                                      \
		int r = real(fp, fmt, ap);                                                                             \
		stdio_end(&c, SP_API_##NAME, fp, &st, -1);                                                             \
		return r;                                                                                              \
	}

STDIO_VSCANF(sp_io_vfscanf, vfscanf)
STDIO_VSCANF(__isoc99_vfscanf, __isoc99_vfscanf)

/* The variadic names: the v-function of the same flavour, recorded under their own name. */
#define STDIO_SCANF(CNAME, NAME, VNAME)                                                                                \
	int CNAME(FILE *fp, const char *fmt, ...)                                                                      \
	{                                                                                                              \
		int (*real)(FILE *, const char *, va_list) =                                                           \
			(int (*)(FILE *, const char *, va_list))io_real_get(IO_FN_##VNAME);                            \
		struct io_call c;                                                                                      \
		struct io_stdio st;                                                                                    \
		va_list ap;                                                                                            \
		va_start(ap, fmt);                                                                                     \
		int rec = stdio_begin(fp, &c, &st);                                                                    \
		int r = real(fp, fmt, ap);                                                                             \
		va_end(ap);                                                                                            \
		if (rec)                                                                                               \
			stdio_end(&c, SP_API_##NAME, fp, &st, -1);                                                     \
		return r;                                                                                              \
	}

STDIO_SCANF(sp_io_fscanf, fscanf, vfscanf)
STDIO_SCANF(__isoc99_fscanf, __isoc99_fscanf, __isoc99_vfscanf)

#pragma GCC visibility pop
