/*
 * testhttp.h - a small HTTP/1.x client for the tests of the watcher's
 * /metrics server (tests/unit/test_watch_httpd.c, tests/e2e/test_watch_prom.c):
 * raw bytes out, the raw response back, so that a test can send anything and
 * check exactly what came back.
 *
 *   sp_t_free_port()        a TCP port free on 127.0.0.1 now (bound to port 0, closed)
 *   sp_t_connect(host, p)   a connected blocking socket to a numeric address, -1 on failure
 *   sp_t_http(...)          send a request, read the response until the server closes
 *   sp_t_http_get(...)      "METHOD path HTTP/1.1" with Host and "Connection: close" (no
 *                           chunked decoding: servers that may chunk get HTTP/1.0 through sp_t_http)
 */
#ifndef STEPPROF_TESTHTTP_H
#define STEPPROF_TESTHTTP_H

#include <stddef.h>

struct sp_t_http_resp {
	int status; /* the status code; 0 when no status line came back (closed, reset, garbage) */
	char *raw;  /* every byte received, NUL-terminated (malloc'd) */
	size_t rawlen;
	char *headers;	  /* the header lines (after the status line), NUL-terminated (malloc'd) */
	const char *body; /* into raw: what followed the empty line */
	size_t bodylen;
	long content_length; /* -1 when absent */
	int reset;	     /* the connection ended with an error (ECONNRESET...) rather than a close */
	int timed_out;	     /* the server neither answered nor closed within the timeout */
};

int sp_t_free_port(void);
int sp_t_connect(const char *host, int port);

/*
 * Send req[0..len) on a new connection to host:port, then (shut_wr) shut the
 * writing side down, and read until the server closes or timeout_ms passes.
 * 0 when connected (whatever came back is in r), -1 when the connection failed.
 */
int sp_t_http(const char *host, int port, const char *req, size_t len, int shut_wr, int timeout_ms,
	      struct sp_t_http_resp *r);
/* The response of fd (already sent a request) until the server closes or timeout_ms passes; closes fd. */
void sp_t_http_read(int fd, int timeout_ms, struct sp_t_http_resp *r);
int sp_t_http_get(const char *host, int port, const char *method, const char *path, int timeout_ms,
		  struct sp_t_http_resp *r);
/* The value of header name (case-insensitive) in r, malloc'd; NULL when absent. */
char *sp_t_http_header(const struct sp_t_http_resp *r, const char *name);
void sp_t_http_free(struct sp_t_http_resp *r);

#endif /* STEPPROF_TESTHTTP_H */
