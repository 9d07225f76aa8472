/*
 * test_watch_httpd.c - the /metrics server of `stepprof watch`
 * (analyzer/watch_httpd.c) in this process: the listening addresses, the
 * status of each form of request, a few thousand random and mutated requests
 * (none may crash it, every answer is well formed), and the time
 * watch_httpd_serve() takes. The server as a separate process, under
 * concurrent, slow and vanishing clients: tests/e2e/test_watch_prom.c.
 *
 * Divided into: 1. a server on a thread, 2. addresses and timing, 3. requests.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "testhttp.h"
#include "testlib.h"
#include "watch_metrics.h"

/* ----------------------------------------------------- 1. a server on a thread */

static const char BODY[] = "# HELP x y\n# TYPE x gauge\nx 1\n";

struct server {
	struct watch_httpd *h;
	int port;
	pthread_t th;
	int stop;
	int failed; /* watch_httpd_serve returned -1 */
};

static void *serve_loop(void *p)
{
	struct server *s = p;
	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE))
		if (watch_httpd_serve(s->h, 20, BODY, sizeof(BODY) - 1) != 0) {
			__atomic_store_n(&s->failed, 1, __ATOMIC_RELEASE);
			break;
		}
	return NULL;
}

static void server_start(struct server *s)
{
	char err[256];
	memset(s, 0, sizeof(*s));
	cr_assert_eq(watch_httpd_open("127.0.0.1:0", &s->h, err, sizeof(err)), 0, "%s", err);
	s->port = watch_httpd_port(s->h);
	cr_assert_gt(s->port, 0);
	cr_assert_eq(pthread_create(&s->th, NULL, serve_loop, s), 0);
}

static void server_stop(struct server *s)
{
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
	pthread_join(s->th, NULL);
	watch_httpd_close(s->h);
}

static long long mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --------------------------------------------------- 2. addresses and timing */

Test(watch_prom_httpd, bad_addresses_refused_in_one_line)
{
	static const char *const bad[] = {
	    "",
	    "9464",
	    "::1:9464",
	    "[::1]",
	    "[::1]9464",
	    "127.0.0.1:",
	    "127.0.0.1:65536",
	    "127.0.0.1:12a",
	    "127.0.0.1:-1",
	    "[]:80",
	    "127.0.0.1:099999",
	    "[fe80::zz]:80",
	    "[127.0.0.1]:80",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct watch_httpd *h = (struct watch_httpd *)1;
		char err[256] = "";
		cr_expect_eq(watch_httpd_open(bad[i], &h, err, sizeof(err)), -1, "\"%s\" accepted", bad[i]);
		cr_expect_null(h, "\"%s\"", bad[i]);
		cr_expect_neq(err[0], 0, "\"%s\": no reason", bad[i]);
		cr_expect_null(strchr(err, '\n'), "\"%s\": %s", bad[i], err);
	}
}

Test(watch_prom_httpd, port_in_use_says_so)
{
	struct watch_httpd *a, *b = NULL;
	char err[256], addr[64];
	cr_assert_eq(watch_httpd_open("127.0.0.1:0", &a, err, sizeof(err)), 0, "%s", err);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", watch_httpd_port(a));
	cr_expect_eq(watch_httpd_open(addr, &b, err, sizeof(err)), -1);
	cr_expect_not_null(strstr(err, strerror(EADDRINUSE)), "%s", err);
	cr_expect_not_null(strstr(err, addr), "%s", err);
	watch_httpd_close(a);
	/* Once closed, the port is free again at once (SO_REUSEADDR; no connection was in TIME_WAIT anyway). */
	cr_expect_eq(watch_httpd_open(addr, &b, err, sizeof(err)), 0, "%s", err);
	watch_httpd_close(b);
}

/* Served on addr, reached on each address of to[] (NULL-terminated). */
static void reach(const char *addr, const char *const to[])
{
	struct watch_httpd *h;
	char err[256];
	cr_assert_eq(watch_httpd_open(addr, &h, err, sizeof(err)), 0, "%s", err);
	int port = watch_httpd_port(h);
	cr_assert_gt(port, 0, "%s", addr);
	for (int i = 0; to[i]; i++) {
		int fd = sp_t_connect(to[i], port);
		cr_assert_geq(fd, 0, "%s: cannot connect to %s", addr, to[i]);
		const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
		cr_assert_eq(write(fd, req, sizeof(req) - 1), (ssize_t)sizeof(req) - 1);
		/* The request waits in the socket: serve it, here, then read the answer. */
		for (int k = 0; k < 10; k++)
			cr_assert_eq(watch_httpd_serve(h, 20, BODY, sizeof(BODY) - 1), 0);
		struct sp_t_http_resp r;
		sp_t_http_read(fd, 2000, &r);
		cr_expect_eq(r.status, 200, "%s via %s: %s", addr, to[i], r.raw);
		sp_t_http_free(&r);
	}
	watch_httpd_close(h);
}

static int have_ipv6_loopback(void)
{
	struct watch_httpd *h;
	char err[256];
	if (watch_httpd_open("[::1]:0", &h, err, sizeof(err)) != 0)
		return 0;
	watch_httpd_close(h);
	return 1;
}

Test(watch_prom_httpd, ipv4_ipv6_and_every_address)
{
	reach("127.0.0.1:0", (const char *const[]){"127.0.0.1", NULL});
	if (have_ipv6_loopback()) {
		reach("[::1]:0", (const char *const[]){"::1", NULL});
		reach(":0", (const char *const[]){"127.0.0.1", "::1", NULL});
	} else {
		sp_t_note("watch_prom_httpd: no IPv6 loopback here: [::1] not checked");
		reach(":0", (const char *const[]){"127.0.0.1", NULL});
	}
	/* localhost: its loopback addresses (IPv4 always, in /etc/hosts) */
	reach("localhost:0", (const char *const[]){"127.0.0.1", NULL});
}

static void on_alarm(int sig)
{
	(void)sig;
}

Test(watch_prom_httpd, serve_takes_its_timeout_or_less_on_a_signal)
{
	struct watch_httpd *h;
	char err[256];
	cr_assert_eq(watch_httpd_open("127.0.0.1:0", &h, err, sizeof(err)), 0, "%s", err);

	long long t0 = mono_ms();
	cr_expect_eq(watch_httpd_serve(h, 0, BODY, 1), 0);
	long long t1 = mono_ms();
	cr_expect_lt(t1 - t0, 100, "timeout 0: one look, took %lld ms", t1 - t0);

	cr_expect_eq(watch_httpd_serve(h, 300, BODY, 1), 0);
	long long t2 = mono_ms();
	cr_expect_geq(t2 - t1, 290, "returned early: %lld ms", t2 - t1);
	cr_expect_lt(t2 - t1, 2000, "took %lld ms for 300", t2 - t1);

	struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {.it_value = {.tv_usec = 100000}};
	setitimer(ITIMER_REAL, &it, NULL);
	cr_expect_eq(watch_httpd_serve(h, 10000, BODY, 1), 0);
	long long t3 = mono_ms();
	cr_expect_lt(t3 - t2, 2000, "a signal ends serve: took %lld ms", t3 - t2);
	watch_httpd_close(h);
}

Test(watch_prom_httpd, each_request_gets_the_body_of_its_time)
{
	struct watch_httpd *h;
	char err[256];
	cr_assert_eq(watch_httpd_open("127.0.0.1:0", &h, err, sizeof(err)), 0, "%s", err);
	int port = watch_httpd_port(h);
	const char *bodies[] = {"first\n", "second, longer\n"};
	for (int i = 0; i < 2; i++) {
		int fd = sp_t_connect("127.0.0.1", port);
		cr_assert_geq(fd, 0);
		cr_assert_eq(write(fd, "GET /metrics HTTP/1.1\r\n\r\n", 25), 25);
		for (int k = 0; k < 10; k++)
			watch_httpd_serve(h, 20, bodies[i], strlen(bodies[i]));
		struct sp_t_http_resp r;
		sp_t_http_read(fd, 2000, &r);
		cr_expect_eq(r.status, 200);
		cr_expect_eq(r.bodylen, strlen(bodies[i]));
		cr_expect_eq(memcmp(r.body, bodies[i], r.bodylen), 0, "%s", r.raw);
		sp_t_http_free(&r);
	}
	/* No body yet (NULL): an empty 200, which Prometheus takes as a scrape without samples. */
	int fd = sp_t_connect("127.0.0.1", port);
	cr_assert_eq(write(fd, "GET /metrics HTTP/1.1\r\n\r\n", 25), 25);
	for (int k = 0; k < 10; k++)
		watch_httpd_serve(h, 20, NULL, 0);
	struct sp_t_http_resp r;
	sp_t_http_read(fd, 2000, &r);
	cr_expect_eq(r.status, 200);
	cr_expect_eq(r.content_length, 0);
	sp_t_http_free(&r);
	watch_httpd_close(h);
}

/* ----------------------------------------------------------------- 3. requests */

static void expect_status(struct server *s, const char *req, size_t len, int want, int want_body)
{
	struct sp_t_http_resp r;
	cr_assert_eq(sp_t_http("127.0.0.1", s->port, req, len, 0, 5000, &r), 0);
	cr_expect_eq(r.status, want, "%.*s -> %s", (int)(len > 60 ? 60 : len), req, r.raw);
	cr_expect_eq(r.content_length, want == 200 ? (long)sizeof(BODY) - 1 : r.content_length);
	cr_expect_eq(r.bodylen, want_body ? (size_t)r.content_length : 0, "%.*s -> %s", (int)(len > 60 ? 60 : len), req,
		     r.raw);
	if (want == 200 && want_body)
		cr_expect_eq(memcmp(r.body, BODY, r.bodylen), 0);
	char *conn = sp_t_http_header(&r, "Connection");
	cr_expect(conn && !strcmp(conn, "close"), "Connection: %s", conn ? conn : "(none)");
	free(conn);
	sp_t_http_free(&r);
}

#define REQ(s) s, sizeof(s) - 1

Test(watch_prom_httpd, status_of_each_form_of_request)
{
	struct server s;
	server_start(&s);
	expect_status(&s, REQ("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n"), 200, 1);
	expect_status(&s, REQ("GET /metrics HTTP/1.0\r\n\r\n"), 200, 1);
	expect_status(&s, REQ("HEAD /metrics HTTP/1.1\r\n\r\n"), 200, 0);
	expect_status(&s, REQ("GET /metrics?name[]=x HTTP/1.1\r\n\r\n"), 200, 1);
	expect_status(&s, REQ("GET http://example:9464/metrics HTTP/1.1\r\n\r\n"), 200, 1);
	expect_status(&s, REQ("\r\nGET /metrics HTTP/1.1\r\n\r\n"), 200, 1);
	expect_status(&s, REQ("GET /metrics HTTP/1.1\n\n"), 200, 1);
	/* a body, and a second pipelined request: answered once, then closed without a reset */
	expect_status(&s, REQ("GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"), 200, 1);
	expect_status(&s, REQ("GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n"), 200, 1);

	expect_status(&s, REQ("GET / HTTP/1.1\r\n\r\n"), 404, 1);
	expect_status(&s, REQ("GET /metrics/ HTTP/1.1\r\n\r\n"), 404, 1);
	expect_status(&s, REQ("GET /metricsx HTTP/1.1\r\n\r\n"), 404, 1);
	expect_status(&s, REQ("GET /METRICS HTTP/1.1\r\n\r\n"), 404, 1);
	expect_status(&s, REQ("HEAD /x HTTP/1.1\r\n\r\n"), 404, 0);
	expect_status(&s, REQ("POST /x HTTP/1.1\r\n\r\n"), 404, 1);

	expect_status(&s, REQ("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"), 405, 1);
	expect_status(&s, REQ("PUT /metrics HTTP/1.1\r\n\r\n"), 405, 1);
	expect_status(&s, REQ("get /metrics HTTP/1.1\r\n\r\n"), 405, 1); /* methods are case-sensitive */
	expect_status(&s, REQ("OPTIONS /metrics HTTP/1.1\r\n\r\n"), 405, 1);

	expect_status(&s, REQ("GET /metrics HTTP/2.0\r\n\r\n"), 505, 1);
	expect_status(&s, REQ("GET /metrics\r\n\r\n"), 400, 1);
	expect_status(&s, REQ("GET  /metrics HTTP/1.1\r\n\r\n"), 400, 1);
	expect_status(&s, REQ("G\0T /metrics HTTP/1.1\r\n\r\n"), 400, 1);
	expect_status(&s, REQ("GET /metrics HTTP/1.1x\r\n\r\n"), 400, 1);
	expect_status(&s, REQ("\r\n\r\n"), 400, 1);

	/* The limit: 8 KiB of request line and headers, the empty line included. */
	char big[9 * 1024];
	const char head[] = "GET /metrics HTTP/1.1\r\nX-Pad: ";
	memcpy(big, head, sizeof(head) - 1);
	size_t fit = 8192 - 4;
	memset(big + sizeof(head) - 1, 'a', fit - (sizeof(head) - 1));
	memcpy(big + fit, "\r\n\r\n", 4);
	expect_status(&s, big, 8192, 200, 1);
	memset(big + sizeof(head) - 1, 'a', sizeof(big) - (sizeof(head) - 1) - 4);
	memcpy(big + sizeof(big) - 4, "\r\n\r\n", 4);
	expect_status(&s, big, sizeof(big), 431, 1);

	cr_expect_eq(s.failed, 0);
	server_stop(&s);
}

static uint64_t rnd_state;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* A random request: bytes, tokens, or a valid request mutated. Returns its length. */
static size_t random_request(char *buf, size_t cap)
{
	static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "", "GE", "GET\t", "\x01\x02", "DELETE"};
	static const char *const targets[] = {"/metrics",	  "/",	       "/metrics?a=b", "*",
					      "http://h/metrics", "http://",   "/m\xffx",      "",
					      "%2Fmetrics",	  "/metrics#f"};
	static const char *const versions[] = {"HTTP/1.1", "HTTP/1.0", "HTTP/2",   "HTTP/1.12",
					       "HTTP/x.y", "",	       "http/1.1", "HTTP/2.0"};
	size_t n = 0;
	switch (rnd() % 4) {
	case 0: /* random bytes */
		n = rnd() % (rnd() % 2 ? 200 : cap);
		for (size_t i = 0; i < n; i++)
			buf[i] = (char)rnd();
		break;
	case 1: /* random bytes that end like a request */
		n = rnd() % 300;
		for (size_t i = 0; i < n; i++)
			buf[i] = (char)rnd();
		memcpy(buf + n, "\r\n\r\n", 4);
		n += 4;
		break;
	default: { /* a request from parts, then a few bytes changed */
		int len = snprintf(buf, cap, "%s %s %s\r\nHost: a\r\nX: %llu\r\n\r\n", methods[rnd() % 9],
				   targets[rnd() % 10], versions[rnd() % 8], (unsigned long long)rnd());
		n = (size_t)len;
		for (int k = (int)(rnd() % 4); k > 0; k--)
			buf[rnd() % n] = (char)rnd();
		break;
	}
	}
	return n;
}

Test(watch_prom_httpd, random_requests_get_well_formed_answers, .timeout = 120)
{
	struct server s;
	server_start(&s);
	static char req[12 * 1024];
	uint64_t seed = 0x5eed5eedull;
	rnd_state = seed;
	int answered = 0, closed = 0, by_status[600] = {0};
	for (int i = 0; i < 2000; i++) {
		size_t n = random_request(req, sizeof(req));
		struct sp_t_http_resp r;
		/* The client closes its side after the request: an incomplete one ends at once. */
		cr_assert_eq(sp_t_http("127.0.0.1", s.port, req, n, 1, 5000, &r), 0, "request %d: cannot connect", i);
		cr_assert(!r.timed_out, "request %d (seed %llx): no answer and no close: %.*s", i,
			  (unsigned long long)seed, (int)(n > 80 ? 80 : n), req);
		if (r.rawlen == 0) {
			closed++;
		} else {
			answered++;
			cr_assert(r.status == 200 || r.status == 400 || r.status == 404 || r.status == 405 ||
				      r.status == 431 || r.status == 505,
				  "request %d: %.*s -> %.100s", i, (int)(n > 80 ? 80 : n), req, r.raw);
			by_status[r.status]++;
			cr_assert_geq(r.content_length, 0, "request %d: no Content-Length", i);
			cr_assert(r.bodylen == (size_t)r.content_length || r.bodylen == 0,
				  "request %d: %zu bytes for %ld", i, r.bodylen, r.content_length);
			if (r.status == 200) {
				const char *p = req;
				while (*p == '\r' || *p == '\n')
					p++;
				cr_assert((!strncmp(p, "GET ", 4) || !strncmp(p, "HEAD ", 5)) &&
					      memmem(req, n, "/metrics", 8),
					  "request %d answered 200: %.*s", i, (int)(n > 80 ? 80 : n), req);
			}
		}
		sp_t_http_free(&r);
		cr_assert_eq(s.failed, 0, "serve failed after request %d", i);
	}
	sp_t_note(
	    "watch_prom_httpd: 2000 random requests: %d closed unanswered, %d answered (200: %d, 400: %d, 404: %d, "
	    "405: %d, 431: %d, 505: %d)",
	    closed, answered, by_status[200], by_status[400], by_status[404], by_status[405], by_status[431],
	    by_status[505]);
	cr_expect_gt(by_status[200], 0, "the generator never made a good request: the test checked little");
	cr_expect_gt(by_status[400], 0);
	cr_expect_gt(by_status[431], 0);
	cr_expect_gt(by_status[505], 0);
	expect_status(&s, REQ("GET /metrics HTTP/1.1\r\n\r\n"), 200, 1);
	server_stop(&s);
}
