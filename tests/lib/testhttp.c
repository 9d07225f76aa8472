/*
 * testhttp.c - the HTTP client of testhttp.h: plain blocking sockets with
 * send and receive timeouts, poll() for the overall deadline.
 */
#include "testhttp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sp_t_free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int port = -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

int sp_t_connect(const char *host, int port)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		len = sizeof(*s4);
	} else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		len = sizeof(*s6);
	} else {
		return -1;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct timeval tv = {.tv_sec = 5};
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void parse_response(struct sp_t_http_resp *r)
{
	r->status = 0;
	r->content_length = -1;
	r->body = r->raw + r->rawlen;
	r->bodylen = 0;
	r->headers = strdup("");
	int code;
	if (r->rawlen < 12 || sscanf(r->raw, "HTTP/1.%*1[01] %3d", &code) != 1)
		return;
	char *eol = strstr(r->raw, "\r\n");
	char *end = strstr(r->raw, "\r\n\r\n");
	if (!eol || !end)
		return;
	r->status = code;
	free(r->headers);
	r->headers = strndup(eol + 2, (size_t)(end + 2 - (eol + 2)));
	r->body = end + 4;
	r->bodylen = r->rawlen - (size_t)(r->body - r->raw);
	char *cl = sp_t_http_header(r, "Content-Length");
	if (cl) {
		r->content_length = strtol(cl, NULL, 10);
		free(cl);
	}
}

void sp_t_http_read(int fd, int timeout_ms, struct sp_t_http_resp *r)
{
	size_t cap = 65536;
	long long deadline = mono_ms() + timeout_ms;
	memset(r, 0, sizeof(*r));
	r->raw = malloc(cap + 1);
	for (;;) {
		long long left = deadline - mono_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			r->timed_out = 1;
			break;
		}
		if (r->rawlen == cap)
			r->raw = realloc(r->raw, (cap *= 2) + 1);
		ssize_t n = recv(fd, r->raw + r->rawlen, cap - r->rawlen, 0);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			r->reset = 1;
			break;
		}
		r->rawlen += (size_t)n;
	}
	r->raw[r->rawlen] = 0;
	close(fd);
	parse_response(r);
}

int sp_t_http(const char *host, int port, const char *req, size_t len, int shut_wr, int timeout_ms,
	      struct sp_t_http_resp *r)
{
	memset(r, 0, sizeof(*r));
	int fd = sp_t_connect(host, port);
	if (fd < 0)
		return -1;
	/* A server may answer and close before the whole request is sent (too large): not an error here. */
	for (size_t off = 0; off < len;) {
		ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (shut_wr)
		shutdown(fd, SHUT_WR);
	sp_t_http_read(fd, timeout_ms, r);
	return 0;
}

int sp_t_http_get(const char *host, int port, const char *method, const char *path, int timeout_ms,
		  struct sp_t_http_resp *r)
{
	char req[1024];
	int n = snprintf(req, sizeof(req),
			 "%s %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: stepprof-tests\r\nConnection: close\r\n\r\n",
			 method, path, host, port);
	return sp_t_http(host, port, req, (size_t)n, 0, timeout_ms, r);
}

char *sp_t_http_header(const struct sp_t_http_resp *r, const char *name)
{
	size_t nl = strlen(name);
	for (const char *l = r->headers; l && *l;) {
		const char *eol = strstr(l, "\r\n");
		if (!eol)
			break;
		if ((size_t)(eol - l) > nl && !strncasecmp(l, name, nl) && l[nl] == ':') {
			const char *v = l + nl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			return strndup(v, (size_t)(eol - v));
		}
		l = eol + 2;
	}
	return NULL;
}

void sp_t_http_free(struct sp_t_http_resp *r)
{
	free(r->raw);
	free(r->headers);
	memset(r, 0, sizeof(*r));
}
