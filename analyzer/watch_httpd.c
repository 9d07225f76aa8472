/*
 * watch_httpd.c - the small HTTP/1.0 and 1.1 server of `stepprof watch`:
 * GET and HEAD /metrics, answered from the body the watcher passes to each
 * watch_httpd_serve() call (watch_metrics.h). One thread, one poll() loop,
 * non-blocking sockets; no call blocks but poll() itself, bounded by the
 * caller's timeout.
 *
 * Divided into:
 *   1. the address: "host:port", "[v6]:port", ":port" (every address),
 *   2. the listening sockets,
 *   3. a request: reading, parsing, the response,
 *   4. the poll loop: accepting, reading, writing, closing, the timeouts.
 *
 * What a client can do to it, and what happens (every client is untrusted):
 *   - at most WATCH_HTTP_MAX_CONN connections are open at once. While they
 *     are all busy the listening socket is not polled: further connections
 *     wait in the kernel's backlog (BACKLOG) and are served as slots free;
 *   - a request (request line and headers) larger than REQ_MAX gets 431 and
 *     the connection closed; a request body is never read;
 *   - the request must arrive whole within IDLE_MS of the connection
 *     (trickling bytes does not extend it: slowloris); a response that makes
 *     no progress for IDLE_MS is dropped; either closes the connection;
 *   - the response is written with MSG_NOSIGNAL (a client gone mid-response
 *     is an EPIPE for that client, never a SIGPIPE for the watcher), as far
 *     as the socket takes it, the rest at the next POLLOUT;
 *   - every response says "Connection: close". After it the server shuts its
 *     side down and reads (and drops) what the client still sends for up to
 *     LINGER_MS before closing, so that unread bytes (a pipelined request, a
 *     body) do not make the kernel reset the connection under the response.
 * A NULL body (no tick yet) is an empty page, which Prometheus takes as a
 * scrape without samples.
 * Status codes: 200 (GET/HEAD /metrics, any query string), 404 (any other
 * path, whatever the method), 405 (another method on /metrics), 400 (not an
 * HTTP request line), 431 (too large), 505 (not HTTP/1.x).
 */
#include "watch_metrics.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REQ_MAX	   8192 /* request line and headers, their final empty line included */
#define IDLE_MS	   5000
#define LINGER_MS  1000
#define BACKLOG	   64
#define MAX_LISTEN 2 /* a name such as localhost: its IPv4 and IPv6 addresses, on one port */

enum conn_state {
	C_FREE,
	C_READ,	  /* reading the request */
	C_WRITE,  /* writing out[outoff..outlen) */
	C_LINGER, /* response sent, our side shut down: dropping what the client still sends */
};

struct conn {
	int fd;
	enum conn_state state;
	int64_t since_ms; /* C_READ: accepted; C_WRITE: last progress; C_LINGER: response done */
	size_t inlen;
	char *out; /* the whole response, the connection's own copy */
	size_t outlen, outoff;
	char in[REQ_MAX];
};

struct watch_httpd {
	int lfd[MAX_LISTEN];
	int nlisten;
	int port;
	int64_t accept_pause_until; /* out of descriptors: retry accepting then */
	struct conn conn[WATCH_HTTP_MAX_CONN];
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------- 1. the address */

/*
 * Split addr into host (NULL: every address) and port. An IPv6 literal goes
 * in brackets: "::1:9464" would be ambiguous.
 */
static int parse_addr(const char *addr, char **host, char port[8], char *err, size_t errlen)
{
	const char *colon, *h = addr;
	size_t hlen;

	*host = NULL;
	if (addr[0] == '[') {
		const char *close = strchr(addr, ']');
		if (!close || close[1] != ':') {
			snprintf(err, errlen, "%s: expected [IPv6-address]:port", addr);
			return -1;
		}
		h = addr + 1;
		hlen = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon) {
			snprintf(err, errlen, "%s: expected address:port (127.0.0.1:9464, [::1]:9464, :9464)", addr);
			return -1;
		}
		hlen = (size_t)(colon - addr);
		if (memchr(addr, ':', hlen)) {
			snprintf(err, errlen, "%s: an IPv6 address goes in brackets: [::1]:9464", addr);
			return -1;
		}
	}
	const char *p = colon + 1;
	size_t plen = strlen(p);
	unsigned long v = 0;
	for (size_t i = 0; i < plen; i++) {
		if (p[i] < '0' || p[i] > '9' || v > 65535)
			break;
		v = v * 10 + (unsigned long)(p[i] - '0');
	}
	if (plen == 0 || plen > 5 || strspn(p, "0123456789") != plen || v > 65535) {
		snprintf(err, errlen, "%s: the port must be a number from 0 to 65535", addr);
		return -1;
	}
	snprintf(port, 8, "%lu", v);
	if (hlen == 0) {
		if (addr[0] == '[') {
			snprintf(err, errlen, "%s: empty IPv6 address", addr);
			return -1;
		}
		return 0;
	}
	*host = strndup(h, hlen);
	if (!*host) {
		snprintf(err, errlen, "%s: out of memory", addr);
		return -1;
	}
	return 0;
}

/* --------------------------------------------------- 2. the listening sockets */

static int sock_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return -1;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -1;
}

static void set_port(struct sockaddr *sa, int port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons((uint16_t)port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons((uint16_t)port);
}

/* A non-blocking listening socket on sa; dual_stack: an IPv6 socket that also takes IPv4. -1 with errno. */
static int listen_on(const struct sockaddr *sa, socklen_t len, int dual_stack)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1, zero = 0;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
		goto fail;
	if (sa->sa_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual_stack ? &zero : &one, sizeof(int)) != 0)
		goto fail;
	if (bind(fd, sa, len) != 0 || listen(fd, BACKLOG) != 0)
		goto fail;
	return fd;
fail:;
	int e = errno;
	close(fd);
	errno = e;
	return -1;
}

/* Every address: IPv6's "::" taking IPv4 too, or IPv4's 0.0.0.0 where the machine has no IPv6. */
static int listen_any(struct watch_httpd *h, int port)
{
	struct sockaddr_in6 s6 = {
	    .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = in6addr_any};
	int fd = listen_on((struct sockaddr *)&s6, sizeof(s6), 1);
	if (fd < 0 && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL)) {
		struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		s4.sin_addr.s_addr = htonl(INADDR_ANY);
		fd = listen_on((struct sockaddr *)&s4, sizeof(s4), 0);
	}
	if (fd < 0)
		return -1;
	h->lfd[h->nlisten++] = fd;
	return 0;
}

/*
 * Each address of host (at most MAX_LISTEN), all on one port: the first must
 * work; a further one that cannot be bound (IPv6 off, its port taken) is left out.
 */
static int listen_host(struct watch_httpd *h, const char *host, const char *port, char *err, size_t errlen,
		       const char *addr)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_protocol = IPPROTO_TCP, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	if (addr[0] == '[') { /* brackets hold an IPv6 literal, never a name to look up */
		hints.ai_family = AF_INET6;
		hints.ai_flags |= AI_NUMERICHOST;
	}
	int rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "%s: cannot resolve %s: %s", addr, host,
			 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		return -1;
	}
	int first_errno = 0;
	for (struct addrinfo *ai = res; ai && h->nlisten < MAX_LISTEN; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		if (h->nlisten)
			set_port(ai->ai_addr, h->port);
		int fd = listen_on(ai->ai_addr, ai->ai_addrlen, 0);
		if (fd < 0) {
			if (!h->nlisten && !first_errno)
				first_errno = errno;
			continue;
		}
		if (!h->nlisten)
			h->port = sock_port(fd);
		h->lfd[h->nlisten++] = fd;
	}
	freeaddrinfo(res);
	if (!h->nlisten) {
		snprintf(err, errlen, "%s: cannot listen: %s", addr,
			 first_errno ? strerror(first_errno) : "no IPv4 or IPv6 address");
		return -1;
	}
	return 0;
}

int watch_httpd_open(const char *addr, struct watch_httpd **out, char *err, size_t errlen)
{
	char *host = NULL, port[8];
	*out = NULL;
	if (parse_addr(addr, &host, port, err, errlen) != 0)
		return -1;
	struct watch_httpd *h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(err, errlen, "%s: out of memory", addr);
		free(host);
		return -1;
	}
	for (int i = 0; i < WATCH_HTTP_MAX_CONN; i++)
		h->conn[i].fd = -1;
	int rc;
	if (host) {
		rc = listen_host(h, host, port, err, errlen, addr);
	} else {
		rc = listen_any(h, atoi(port));
		if (rc != 0)
			snprintf(err, errlen, "%s: cannot listen: %s", addr, strerror(errno));
		else
			h->port = sock_port(h->lfd[0]);
	}
	free(host);
	if (rc != 0) {
		watch_httpd_close(h);
		return -1;
	}
	*out = h;
	return 0;
}

int watch_httpd_port(const struct watch_httpd *h)
{
	return h->port;
}

void watch_httpd_close(struct watch_httpd *h)
{
	if (!h)
		return;
	for (int i = 0; i < WATCH_HTTP_MAX_CONN; i++)
		if (h->conn[i].state != C_FREE) {
			close(h->conn[i].fd);
			free(h->conn[i].out);
		}
	for (int i = 0; i < h->nlisten; i++)
		close(h->lfd[i]);
	free(h);
}

/* ------------------------------------------------------------- 3. a request */

static const char *reason(int code)
{
	switch (code) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 431:
		return "Request Header Fields Too Large";
	case 505:
		return "HTTP Version Not Supported";
	}
	return "Internal Server Error";
}

/* The end of the headers (just past the empty line; bare LF tolerated) in in[0..n), 0 while incomplete. */
static size_t headers_end(const char *in, size_t n, size_t from)
{
	for (size_t i = from; i < n; i++) {
		if (in[i] != '\n')
			continue;
		if (i + 1 < n && in[i + 1] == '\n')
			return i + 2;
		if (i + 2 < n && in[i + 1] == '\r' && in[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

static int is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The status of the request whose headers are in[0..n); *head: it is a HEAD. */
static int parse_request(const char *in, size_t n, int *head)
{
	*head = 0;
	/* Empty lines before the request line are ignored (RFC 9112, 2.2). */
	while (n && (*in == '\r' || *in == '\n'))
		in++, n--;
	const char *eol = memchr(in, '\n', n);
	size_t len = eol ? (size_t)(eol - in) : n;
	if (len && in[len - 1] == '\r')
		len--;

	const char *sp1 = memchr(in, ' ', len);
	if (!sp1 || sp1 == in)
		return 400;
	const char *target = sp1 + 1;
	const char *sp2 = memchr(target, ' ', len - (size_t)(target - in));
	if (!sp2 || sp2 == target)
		return 400;
	const char *version = sp2 + 1;
	size_t mlen = (size_t)(sp1 - in), tlen = (size_t)(sp2 - target), vlen = len - (size_t)(version - in);
	for (size_t i = 0; i < mlen; i++)
		if (!is_tchar((unsigned char)in[i]))
			return 400;
	*head = mlen == 4 && !memcmp(in, "HEAD", 4); /* whatever the status: a HEAD's answer has no body */
	if (vlen != 8 || memcmp(version, "HTTP/", 5) != 0 || version[5] < '0' || version[5] > '9' ||
	    version[6] != '.' || version[7] < '0' || version[7] > '9')
		return 400;
	if (version[5] != '1')
		return 505;

	/* The absolute form (http://host/metrics) names the same path. */
	if (tlen > 7 && (!strncasecmp(target, "http://", 7) || (tlen > 8 && !strncasecmp(target, "https://", 8)))) {
		const char *auth = memchr(target, '/', tlen) + 2;
		const char *path = memchr(auth, '/', tlen - (size_t)(auth - target));
		if (!path)
			return 404;
		tlen -= (size_t)(path - target);
		target = path;
	}
	size_t plen = 0;
	while (plen < tlen && target[plen] != '?' && target[plen] != '#')
		plen++;
	if (plen != 8 || memcmp(target, "/metrics", 8) != 0)
		return 404;
	if (*head || (mlen == 3 && !memcmp(in, "GET", 3)))
		return 200;
	return 405;
}

/* c's response: code, with body[0..len) (left out for a HEAD). -1 when out of memory. */
static int make_response(struct conn *c, int code, int head, const char *body, size_t len)
{
	char hdr[256], errbody[64];
	const char *type = "text/plain; version=0.0.4; charset=utf-8";
	if (code != 200) {
		snprintf(errbody, sizeof(errbody), "%d %s\n", code, reason(code));
		body = errbody;
		len = strlen(errbody);
		type = "text/plain; charset=utf-8";
	}
	if (!body)
		len = 0;
	int hlen = snprintf(hdr, sizeof(hdr),
			    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
			    code, reason(code), type, len, code == 405 ? "Allow: GET, HEAD\r\n" : "");
	size_t blen = head ? 0 : len;
	c->out = malloc((size_t)hlen + blen);
	if (!c->out)
		return -1;
	memcpy(c->out, hdr, (size_t)hlen);
	if (blen)
		memcpy(c->out + hlen, body, blen);
	c->outlen = (size_t)hlen + blen;
	c->outoff = 0;
	return 0;
}

/* ------------------------------------------------------------ 4. the poll loop */

static void conn_close(struct conn *c)
{
	close(c->fd);
	free(c->out);
	c->out = NULL;
	c->fd = -1;
	c->state = C_FREE;
}

static int64_t conn_expiry(const struct conn *c)
{
	return c->since_ms + (c->state == C_LINGER ? LINGER_MS : IDLE_MS);
}

/* The response is out: our side shut down, what the client still sends dropped for a while. */
static void conn_linger(struct conn *c, int64_t now)
{
	free(c->out);
	c->out = NULL;
	if (shutdown(c->fd, SHUT_WR) != 0) {
		conn_close(c);
		return;
	}
	c->state = C_LINGER;
	c->since_ms = now;
}

static void conn_write(struct conn *c, int64_t now)
{
	while (c->outoff < c->outlen) {
		ssize_t w = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_close(c); /* EPIPE, ECONNRESET: the client has gone */
			return;
		}
		c->outoff += (size_t)w;
		c->since_ms = now;
	}
	conn_linger(c, now);
}

static void conn_read(struct conn *c, int64_t now, const char *body, size_t len)
{
	ssize_t r = recv(c->fd, c->in + c->inlen, REQ_MAX - c->inlen, MSG_DONTWAIT);
	if (r < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			conn_close(c);
		return;
	}
	if (r == 0) { /* closed before a whole request */
		conn_close(c);
		return;
	}
	size_t from = c->inlen > 2 ? c->inlen - 2 : 0;
	c->inlen += (size_t)r;
	size_t end = headers_end(c->in, c->inlen, from);
	int code, head = 0;
	if (end)
		code = parse_request(c->in, end, &head);
	else if (c->inlen == REQ_MAX)
		code = 431;
	else
		return;
	if (make_response(c, code, head, body, len) != 0) {
		conn_close(c);
		return;
	}
	c->state = C_WRITE;
	c->since_ms = now;
	conn_write(c, now);
}

static void conn_drain(struct conn *c)
{
	char buf[4096];
	for (int i = 0; i < 16; i++) {
		ssize_t r = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r > 0)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		conn_close(c); /* the client closed its side too, or is gone */
		return;
	}
}

/* Take the waiting connections while slots are free. -1 when the listening socket itself fails. */
static int accept_some(struct watch_httpd *h, int lfd, int64_t now)
{
	for (int i = 0; i < WATCH_HTTP_MAX_CONN; i++) {
		struct conn *c = &h->conn[i];
		if (c->state != C_FREE)
			continue;
		int fd;
		for (;;) {
			fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd >= 0)
				break;
			switch (errno) {
			case EAGAIN:
#if EWOULDBLOCK != EAGAIN
			case EWOULDBLOCK:
#endif
				return 0;
			/* Linux reports the new connection's own network errors from accept: that client's only. */
			case EINTR:
			case ECONNABORTED:
			case EPROTO:
			case ENOPROTOOPT:
			case EHOSTDOWN:
			case ENONET:
			case EHOSTUNREACH:
			case EOPNOTSUPP:
			case ENETDOWN:
			case ENETUNREACH:
			case EPERM:
				continue;
			case EMFILE:
			case ENFILE:
			case ENOBUFS:
			case ENOMEM:
				h->accept_pause_until = now + 100;
				return 0;
			default:
				return -1;
			}
		}
		c->fd = fd;
		c->state = C_READ;
		c->since_ms = now;
		c->inlen = 0;
		c->out = NULL;
		c->outlen = c->outoff = 0;
	}
	return 0;
}

int watch_httpd_serve(struct watch_httpd *h, int timeout_ms, const char *body, size_t len)
{
	int64_t now = now_ms();
	int64_t deadline = now + (timeout_ms > 0 ? timeout_ms : 0);

	for (;;) {
		struct pollfd pfd[MAX_LISTEN + WATCH_HTTP_MAX_CONN];
		int who[MAX_LISTEN + WATCH_HTTP_MAX_CONN]; /* < 0: listener -1-i; else the connection */
		int n = 0, nfree = 0;
		int64_t wake = deadline;

		for (int i = 0; i < WATCH_HTTP_MAX_CONN; i++) {
			struct conn *c = &h->conn[i];
			if (c->state != C_FREE && now >= conn_expiry(c))
				conn_close(c);
			if (c->state == C_FREE) {
				nfree++;
				continue;
			}
			if (conn_expiry(c) < wake)
				wake = conn_expiry(c);
			pfd[n] = (struct pollfd){.fd = c->fd, .events = c->state == C_WRITE ? POLLOUT : POLLIN};
			who[n++] = i;
		}
		if (nfree && now >= h->accept_pause_until) {
			for (int i = 0; i < h->nlisten; i++) {
				pfd[n] = (struct pollfd){.fd = h->lfd[i], .events = POLLIN};
				who[n++] = -1 - i;
			}
		} else if (nfree && h->accept_pause_until < wake) {
			wake = h->accept_pause_until;
		}

		int64_t wait = wake > now ? wake - now : 0;
		int r = poll(pfd, (nfds_t)n, wait > INT_MAX ? INT_MAX : (int)wait);
		if (r < 0)
			return errno == EINTR ? 0 : -1;
		now = now_ms();
		for (int k = 0; k < n && r > 0; k++) {
			if (!pfd[k].revents)
				continue;
			if (who[k] < 0) {
				if (pfd[k].revents & (POLLERR | POLLNVAL))
					return -1;
				if (accept_some(h, pfd[k].fd, now) != 0)
					return -1;
				continue;
			}
			struct conn *c = &h->conn[who[k]];
			if (c->state == C_READ)
				conn_read(c, now, body, len);
			else if (c->state == C_WRITE)
				conn_write(c, now);
			else if (c->state == C_LINGER)
				conn_drain(c);
		}
		if (now >= deadline)
			return 0;
	}
}
