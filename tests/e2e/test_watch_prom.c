/*
 * test_watch_prom.c - the Prometheus side of `stepprof watch` as a separate
 * process (build/tests/bin/promserve: analyzer/watch_prom.c and
 * watch_httpd.c on a sample snapshot), against clients that misbehave and
 * against the real Prometheus tools of Debian's prometheus and
 * prometheus-node-exporter packages (scripts/install-deps.sh installs them).
 *
 * Divided into:
 *   1. processes: every server a test starts is recorded, and the suite's
 *      fini stops it (SIGTERM, then SIGKILL) whatever the test's outcome;
 *      each also dies with the test process (PR_SET_PDEATHSIG),
 *   2. HTTP: statuses, limits, concurrent, idle, slow and vanishing clients,
 *   3. the tools: promtool, a Prometheus server scraping promserve,
 *      node_exporter's textfile collector.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testhttp.h"
#include "testlib.h"
#include "trainerlib.h"

/* The sample of promserve (tests/workloads/promserve.c). */
#define SAMPLE_JOB	  "train \"resnet\" C:\\runs\nnext"
#define SAMPLE_JOB_TEXT	  "job=\"train \\\"resnet\\\" C:\\\\runs\\nnext\""
#define SAMPLE_ITERATIONS "1234"

/* ------------------------------------------------------------- 1. processes */

#define MAX_CHILDREN 8
static pid_t g_child[MAX_CHILDREN];
static int g_nchild;
static char *g_tmp; /* the test's directory, removed by the fini */

static void stop_children(void)
{
	for (int i = 0; i < g_nchild; i++)
		if (g_child[i] > 0)
			kill(g_child[i], SIGTERM);
	for (int i = 0; i < g_nchild; i++) {
		if (g_child[i] <= 0)
			continue;
		int st, waited = 0;
		while (waitpid(g_child[i], &st, WNOHANG) == 0) {
			if (waited++ == 250) { /* 5 s */
				kill(g_child[i], SIGKILL);
				waitpid(g_child[i], &st, 0);
				break;
			}
			usleep(20000);
		}
		g_child[i] = 0;
	}
	g_nchild = 0;
	if (g_tmp) {
		sp_t_rmrf(g_tmp);
		free(g_tmp);
		g_tmp = NULL;
	}
}

TestSuite(watch_prom_http, .fini = stop_children);
TestSuite(watch_prom_tools, .fini = stop_children);

static const char *tmpdir(void)
{
	if (!g_tmp)
		g_tmp = sp_t_tmpdir("watchprom");
	return g_tmp;
}

static char *tmp_path(const char *name)
{
	char *p;
	cr_assert_geq(asprintf(&p, "%s/%s", tmpdir(), name), 0);
	return p;
}

/*
 * Start argv (argv[0] a path) with stdin from /dev/null, stderr appended to
 * log (NULL: /dev/null), stdout into *out_fd (a pipe; NULL: the same as stderr).
 */
static pid_t spawn(char *const argv[], int *out_fd, const char *log)
{
	int p[2] = {-1, -1};
	pid_t parent = getpid();
	cr_assert_lt(g_nchild, MAX_CHILDREN);
	if (out_fd)
		cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		int null = open("/dev/null", O_RDWR);
		int err = log ? open(log, O_WRONLY | O_CREAT | O_APPEND, 0644) : null;
		dup2(null, 0);
		dup2(err, 2);
		dup2(out_fd ? p[1] : err, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	g_child[g_nchild++] = pid;
	if (out_fd) {
		close(p[1]);
		*out_fd = p[0];
	}
	return pid;
}

static int alive(pid_t pid)
{
	int st;
	return waitpid(pid, &st, WNOHANG) == 0;
}

static long long mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* promserve --listen addr [extra...]: its pid, and the port it printed. */
static pid_t start_promserve(const char *addr, const char *extra1, const char *extra2, int *port)
{
	char *bin = (char *)sp_t_build("tests/bin/promserve");
	char *argv[] = {bin, "--listen", (char *)addr, (char *)extra1, (char *)extra2, NULL};
	int fd;
	pid_t pid = spawn(argv, &fd, NULL);
	char line[32] = "";
	size_t n = 0;
	long long deadline = mono_ms() + 10000;
	while (n < sizeof(line) - 1 && !memchr(line, '\n', n)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long long left = deadline - mono_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		ssize_t r = read(fd, line + n, sizeof(line) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	line[n] = 0;
	*port = atoi(line);
	cr_assert_gt(*port, 0, "%s --listen %s printed no port: \"%s\"", bin, addr, line);
	free(bin);
	return pid;
}

/* What `promserve --print` writes: the exposition every test compares with. */
static char *sample_text(void)
{
	char *bin = (char *)sp_t_build("tests/bin/promserve");
	char *argv[] = {bin, "--print", NULL};
	struct sp_t_result res;
	sp_t_run(&res, argv, NULL, NULL, 30);
	cr_assert_eq(res.status, 0, "%s", res.err);
	char *out = res.out;
	res.out = NULL;
	sp_t_result_free(&res);
	free(bin);
	return out;
}

/* ------------------------------------------------------------------- 2. HTTP */

Test(watch_prom_http, get_metrics_answers_the_exposition)
{
	int port;
	start_promserve("127.0.0.1:0", NULL, NULL, &port);
	char *want = sample_text();
	struct sp_t_http_resp r;
	cr_assert_eq(sp_t_http_get("127.0.0.1", port, "GET", "/metrics", 5000, &r), 0);
	cr_expect_eq(r.status, 200, "%s", r.raw);
	char *type = sp_t_http_header(&r, "Content-Type");
	cr_expect(type && !strcmp(type, "text/plain; version=0.0.4; charset=utf-8"), "Content-Type: %s",
		  type ? type : "(none)");
	cr_expect_eq(r.content_length, (long)strlen(want));
	cr_expect_eq(r.bodylen, strlen(want));
	cr_expect(r.bodylen == strlen(want) && !memcmp(r.body, want, r.bodylen), "body:\n%s", r.body);
	free(type);
	sp_t_http_free(&r);

	cr_assert_eq(sp_t_http_get("127.0.0.1", port, "HEAD", "/metrics", 5000, &r), 0);
	cr_expect_eq(r.status, 200, "%s", r.raw);
	cr_expect_eq(r.content_length, (long)strlen(want), "HEAD says the length of the GET");
	cr_expect_eq(r.bodylen, 0, "HEAD has no body: %s", r.raw);
	sp_t_http_free(&r);
	free(want);
}

Test(watch_prom_http, other_paths_404_other_methods_405)
{
	int port;
	start_promserve("127.0.0.1:0", NULL, NULL, &port);
	static const struct {
		const char *method, *path;
		int status;
	} cases[] = {
	    {"GET", "/", 404},
	    {"GET", "/metrics/", 404},
	    {"GET", "/metricsx", 404},
	    {"GET", "/favicon.ico", 404},
	    {"GET", "/metrics?debug=1", 200},
	    {"POST", "/metrics", 405},
	    {"PUT", "/metrics", 405},
	    {"DELETE", "/metrics", 405},
	    {"PATCH", "/metrics", 405},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sp_t_http_resp r;
		cr_assert_eq(sp_t_http_get("127.0.0.1", port, cases[i].method, cases[i].path, 5000, &r), 0);
		cr_expect_eq(r.status, cases[i].status, "%s %s: %s", cases[i].method, cases[i].path, r.raw);
		if (cases[i].status == 405) {
			char *allow = sp_t_http_header(&r, "Allow");
			cr_expect(allow && !strcmp(allow, "GET, HEAD"), "Allow: %s", allow ? allow : "(none)");
			free(allow);
		}
		sp_t_http_free(&r);
	}
}

Test(watch_prom_http, request_over_8_kib_refused)
{
	int port;
	pid_t pid = start_promserve("127.0.0.1:0", NULL, NULL, &port);
	size_t n = 9 * 1024;
	char *req = malloc(n);
	int h = snprintf(req, n, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
	memset(req + h, 'a', n - (size_t)h - 4);
	memcpy(req + n - 4, "\r\n\r\n", 4);
	struct sp_t_http_resp r;
	cr_assert_eq(sp_t_http("127.0.0.1", port, req, n, 0, 5000, &r), 0);
	cr_expect(!r.timed_out, "neither refused nor closed");
	cr_expect(r.status == 431 || (r.status == 0 && r.rawlen == 0), "a 9 KiB request: %s", r.raw);
	sp_t_http_free(&r);
	free(req);

	cr_expect(alive(pid));
	cr_assert_eq(sp_t_http_get("127.0.0.1", port, "GET", "/metrics", 5000, &r), 0);
	cr_expect_eq(r.status, 200, "%s", r.raw);
	sp_t_http_free(&r);
}

Test(watch_prom_http, forty_concurrent_clients_all_served)
{
	int port;
	pid_t pid = start_promserve("127.0.0.1:0", NULL, NULL, &port);
	char *want = sample_text();
	enum { N = 40 };
	int fd[N];
	const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
	/* All connected and their requests sent before any answer is read: more than WATCH_HTTP_MAX_CONN at once. */
	for (int i = 0; i < N; i++) {
		fd[i] = sp_t_connect("127.0.0.1", port);
		cr_assert_geq(fd[i], 0, "connection %d", i);
		cr_assert_eq(send(fd[i], req, sizeof(req) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(req) - 1);
	}
	long long t0 = mono_ms();
	int ok = 0;
	for (int i = 0; i < N; i++) {
		struct sp_t_http_resp r;
		sp_t_http_read(fd[i], 10000, &r);
		ok += r.status == 200 && r.bodylen == strlen(want) && !memcmp(r.body, want, r.bodylen);
		sp_t_http_free(&r);
	}
	sp_t_note("watch_prom_http: %d concurrent clients answered in %lld ms", N, mono_ms() - t0);
	cr_expect_eq(ok, N, "%d of %d clients got the whole body (the others wait in the backlog, then are served)", ok,
		     N);
	cr_expect(alive(pid));
	struct sp_t_http_resp r;
	cr_assert_eq(sp_t_http_get("127.0.0.1", port, "GET", "/metrics", 5000, &r), 0);
	cr_expect_eq(r.status, 200, "%s", r.raw);
	sp_t_http_free(&r);
	free(want);
}

/*
 * Twenty clients that connect and send nothing take the 16 slots: a GET
 * behind them waits in the backlog until the idle ones are closed (5 s),
 * then is served. Bounded both ways: not before the slots free, not never.
 */
Test(watch_prom_http, idle_clients_closed_after_5_s, .timeout = 60)
{
	int port;
	pid_t pid = start_promserve("127.0.0.1:0", NULL, NULL, &port);
	enum { N = 20 };
	int fd[N];
	for (int i = 0; i < N; i++) {
		fd[i] = sp_t_connect("127.0.0.1", port);
		cr_assert_geq(fd[i], 0, "connection %d", i);
	}
	usleep(200000); /* the server takes the first 16 */
	long long t0 = mono_ms();
	struct sp_t_http_resp r;
	cr_assert_eq(sp_t_http_get("127.0.0.1", port, "GET", "/metrics", 15000, &r), 0);
	long long waited = mono_ms() - t0;
	sp_t_note("watch_prom_http: a GET behind %d idle connections answered after %lld ms", N, waited);
	cr_expect_eq(r.status, 200, "%s", r.raw);
	cr_expect_geq(waited, 4000, "answered at once: more than WATCH_HTTP_MAX_CONN connections were open together");
	cr_expect_leq(waited, 12000);
	sp_t_http_free(&r);

	/* Every idle connection is closed by the server (the last four after their own 5 s). */
	for (int i = 0; i < N; i++) {
		sp_t_http_read(fd[i], 10000, &r);
		cr_expect(!r.timed_out && r.rawlen == 0, "idle connection %d: %s", i,
			  r.timed_out ? "still open" : r.raw);
		sp_t_http_free(&r);
	}
	cr_expect(alive(pid));
}

Test(watch_prom_http, slow_client_does_not_block_another)
{
	int port;
	pid_t pid = start_promserve("127.0.0.1:0", NULL, NULL, &port);
	int slow = sp_t_connect("127.0.0.1", port);
	cr_assert_geq(slow, 0);
	cr_assert_eq(send(slow, "GET /metr", 9, MSG_NOSIGNAL), 9);

	long long t0 = mono_ms();
	struct sp_t_http_resp r;
	cr_assert_eq(sp_t_http_get("127.0.0.1", port, "GET", "/metrics", 5000, &r), 0);
	long long took = mono_ms() - t0;
	cr_expect_eq(r.status, 200, "%s", r.raw);
	cr_expect_lt(took, 2000, "a GET waited %lld ms behind a slow client", took);
	sp_t_http_free(&r);

	/* The slow client's request, finished a byte at a time within its 5 s, is answered too. */
	const char *rest = "ics HTTP/1.1\r\nHost: x\r\n\r\n";
	for (const char *p = rest; *p; p++) {
		cr_assert_eq(send(slow, p, 1, MSG_NOSIGNAL), 1);
		usleep(20000);
	}
	sp_t_http_read(slow, 5000, &r);
	cr_expect_eq(r.status, 200, "%s", r.raw);
	sp_t_http_free(&r);
	cr_expect(alive(pid));
}

/* A connection whose receive buffer is small: the server's writes to it are partial. */
static int small_window_connect(int port)
{
	/* SO_RCVBUF must be set before connect to shrink the window: connected by hand. */
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), sz = 4096;
	cr_assert_geq(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "cannot connect (is promserve gone?): %s",
		     strerror(errno));
	const char req[] = "GET /metrics HTTP/1.1\r\n\r\n";
	cr_assert_eq(send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(req) - 1);
	return fd;
}

/*
 * A body of megabytes (3,000 ranks): a client that does not read holds its
 * response half written without holding up another client; clients that
 * vanish mid-response (reset, or closed unread) cost the server nothing,
 * not a SIGPIPE (promserve keeps SIGPIPE's default action: death).
 */
Test(watch_prom_http, slow_readers_and_vanishing_clients, .timeout = 120)
{
	int port;
	pid_t pid = start_promserve("127.0.0.1:0", "--ranks", "3000", &port);

	int stuck = small_window_connect(port);
	usleep(100000);

	long long t0 = mono_ms();
	struct sp_t_http_resp r;
	cr_assert_eq(sp_t_http_get("127.0.0.1", port, "GET", "/metrics", 20000, &r), 0);
	long long took = mono_ms() - t0;
	cr_expect_eq(r.status, 200);
	cr_expect_gt(r.content_length, 4 << 20, "a body of megabytes: %ld bytes", r.content_length);
	cr_expect_eq(r.bodylen, (size_t)r.content_length, "the whole body");
	sp_t_note("watch_prom_http: %ld bytes in %lld ms beside a client that reads nothing", r.content_length, took);
	long full = r.content_length;
	sp_t_http_free(&r);

	/* The stuck client, read at last (within its 5 s), gets its whole response: the server kept it. */
	sp_t_http_read(stuck, 20000, &r);
	cr_expect_eq(r.status, 200);
	cr_expect_eq((long)r.bodylen, full, "the response of a client that paused was cut short");
	sp_t_http_free(&r);

	for (int i = 0; i < 5; i++) {
		/* read a little, then reset */
		int fd = small_window_connect(port);
		char buf[1024];
		cr_expect_gt(recv(fd, buf, sizeof(buf), 0), 0);
		struct linger lg = {.l_onoff = 1, .l_linger = 0};
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(fd);
		/* read nothing, close (unread data: the kernel resets too) */
		fd = small_window_connect(port);
		usleep(20000);
		close(fd);
		/*
		 * half-close first, then reset: the server's socket was in CLOSE_WAIT, and
		 * its next send fails with EPIPE, which raises SIGPIPE without MSG_NOSIGNAL
		 */
		fd = small_window_connect(port);
		shutdown(fd, SHUT_WR);
		cr_expect_gt(recv(fd, buf, sizeof(buf), 0), 0);
		usleep(20000);
		close(fd);
	}
	usleep(300000);
	cr_assert(alive(pid), "promserve died of a client that went away mid-response");

	cr_assert_eq(sp_t_http_get("127.0.0.1", port, "GET", "/metrics", 20000, &r), 0);
	cr_expect_eq(r.status, 200);
	cr_expect_eq((long)r.bodylen, full);
	sp_t_http_free(&r);
}

Test(watch_prom_http, garbage_and_half_requests_do_not_crash_it)
{
	int port;
	pid_t pid = start_promserve("127.0.0.1:0", NULL, NULL, &port);
	unsigned seed = 12345;
	char buf[6000];
	for (int i = 0; i < 50; i++) {
		size_t n = (size_t)(rand_r(&seed) % (int)sizeof(buf));
		for (size_t k = 0; k < n; k++)
			buf[k] = (char)rand_r(&seed);
		struct sp_t_http_resp r;
		cr_assert_eq(sp_t_http("127.0.0.1", port, buf, n, 1, 8000, &r), 0); /* then EOF: no 5 s wait */
		sp_t_http_free(&r);
		/* and a connection dropped in the middle of a request line */
		int fd = sp_t_connect("127.0.0.1", port);
		cr_assert_geq(fd, 0);
		send(fd, "GET /met", 8, MSG_NOSIGNAL);
		close(fd);
	}
	cr_expect(alive(pid));
	struct sp_t_http_resp r;
	cr_assert_eq(sp_t_http_get("127.0.0.1", port, "GET", "/metrics", 5000, &r), 0);
	cr_expect_eq(r.status, 200, "%s", r.raw);
	sp_t_http_free(&r);
}

/* promserve's failures: exit status 2, one line on stderr. */
static void expect_failure(char *const argv[], const char *says)
{
	struct sp_t_result res;
	sp_t_run(&res, argv, NULL, NULL, 30);
	cr_expect_eq(res.status, 2, "%s %s: status %d, %s", argv[1], argv[2], res.status, res.err);
	cr_expect(res.errlen > 0 && strchr(res.err, '\n') == res.err + res.errlen - 1, "one line: %s", res.err);
	cr_expect_not_null(strstr(res.err, says), "\"%s\" in: %s", says, res.err);
	sp_t_result_free(&res);
}

Test(watch_prom_http, listen_and_file_errors_in_one_line)
{
	char *bin = (char *)sp_t_build("tests/bin/promserve");
	int port;
	start_promserve("127.0.0.1:0", NULL, NULL, &port);
	char taken[32];
	snprintf(taken, sizeof(taken), "127.0.0.1:%d", port);
	expect_failure((char *[]){bin, "--listen", taken, NULL}, strerror(EADDRINUSE));
	expect_failure((char *[]){bin, "--listen", "::1:9464", NULL}, "brackets");
	expect_failure((char *[]){bin, "--listen", "127.0.0.1:70000", NULL}, "port");
	expect_failure((char *[]){bin, "--listen", "127.0.0.1", NULL}, "127.0.0.1");
	char *missing = tmp_path("no/such/dir/stepprof.prom");
	expect_failure((char *[]){bin, "--prom-file", missing, NULL}, missing);
	free(missing);
	free(bin);
}

/* --------------------------------------------------------------- 3. the tools */

/* The tool's path: $PATH, then the directories Debian installs them in; NULL when absent. */
static char *find_tool(const char *name)
{
	const char *path = getenv("PATH");
	char *dirs;
	cr_assert_geq(asprintf(&dirs, "%s:/usr/bin:/usr/sbin:/usr/local/bin", path ? path : ""), 0);
	char *save = NULL, *found = NULL;
	for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		char *p;
		cr_assert_geq(asprintf(&p, "%s/%s", d, name), 0);
		if (access(p, X_OK) == 0)
			found = p;
		else
			free(p);
	}
	free(dirs);
	return found;
}

static char *need_tool(const char *name, const char *package)
{
	char *p = find_tool(name);
	if (!p)
		cr_skip_test("%s not installed: apt-get install %s (scripts/install-deps.sh installs it)", name,
			     package);
	return p;
}

/* The last lines of a log, for a failure's message (static buffer). */
static const char *log_tail(const char *path)
{
	static char tail[2048];
	size_t len;
	char *text = sp_t_read_file(path, &len);
	if (!text)
		return "(no log)";
	snprintf(tail, sizeof(tail), "%s", len > sizeof(tail) - 1 ? text + len - (sizeof(tail) - 1) : text);
	free(text);
	return tail;
}

/* promtool check metrics < text: its status, stderr and stdout in *out (malloc'd). */
static int promtool_check(const char *promtool, const char *text, char **out)
{
	char *argv[] = {(char *)promtool, "check", "metrics", NULL};
	struct sp_t_result res;
	sp_t_run(&res, argv, NULL, text, 60);
	cr_assert_geq(asprintf(out, "%s%s", res.out, res.err), 0);
	int st = res.status;
	sp_t_result_free(&res);
	return st;
}

Test(watch_prom_tools, promtool_accepts_the_metrics_body)
{
	char *promtool = need_tool("promtool", "prometheus");
	int port;
	start_promserve("127.0.0.1:0", NULL, NULL, &port);
	struct sp_t_http_resp r;
	cr_assert_eq(sp_t_http_get("127.0.0.1", port, "GET", "/metrics", 5000, &r), 0);
	cr_assert_eq(r.status, 200);
	char *said;
	int st = promtool_check(promtool, r.body, &said);
	cr_expect_eq(st, 0, "promtool check metrics: status %d:\n%s", st, said);
	cr_expect_eq(said[0], 0, "promtool has remarks:\n%s", said);
	free(said);

	/* promtool does check: the same page with a counter not named _total is refused. */
	char *bad = strdup(r.body), *p;
	while ((p = strstr(bad, "stepprof_lost_records_total")))
		memcpy(p + strlen("stepprof_lost_records"), "_xxxxx", 6);
	st = promtool_check(promtool, bad, &said);
	cr_expect_neq(st, 0, "promtool took a counter named _xxxxx:\n%s", bad);
	free(said);
	free(bad);
	sp_t_http_free(&r);
	free(promtool);
}

Test(watch_prom_tools, promtool_accepts_the_textfile)
{
	char *promtool = need_tool("promtool", "prometheus");
	char *bin = (char *)sp_t_build("tests/bin/promserve");
	char *file = tmp_path("stepprof.prom");
	struct sp_t_result res;
	sp_t_run(&res, (char *[]){bin, "--prom-file", file, NULL}, NULL, NULL, 30);
	cr_assert_eq(res.status, 0, "%s", res.err);
	sp_t_result_free(&res);
	size_t len;
	char *text = sp_t_read_file(file, &len);
	cr_assert_not_null(text);
	char *want = sample_text();
	cr_expect_str_eq(text, want, "the textfile is the /metrics body");
	char *said;
	int st = promtool_check(promtool, text, &said);
	cr_expect_eq(st, 0, "promtool check metrics: status %d:\n%s", st, said);
	cr_expect_eq(said[0], 0, "promtool has remarks:\n%s", said);
	free(said);
	free(want);
	free(text);
	free(file);
	free(bin);
	free(promtool);
}

/* GET path from a Go server (HTTP/1.0: no chunked encoding, closed after): the body, malloc'd; NULL on no 200. */
static char *go_get(int port, const char *path)
{
	char req[512];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\n\r\n", path, port);
	struct sp_t_http_resp r;
	if (sp_t_http("127.0.0.1", port, req, (size_t)n, 0, 5000, &r) != 0)
		return NULL;
	char *body = r.status == 200 ? strndup(r.body, r.bodylen) : NULL;
	sp_t_http_free(&r);
	return body;
}

/*
 * A Prometheus server of the test's own (never the packaged service) scrapes
 * promserve every second; its query API returns the sample's iteration count,
 * labels included (honor_labels: the page's job label is kept).
 */
Test(watch_prom_tools, prometheus_scrapes_it, .timeout = 120)
{
	char *prometheus = need_tool("prometheus", "prometheus");
	int port;
	start_promserve("127.0.0.1:0", NULL, NULL, &port);
	int pport = sp_t_free_port();
	cr_assert_gt(pport, 0);
	char *conf = tmp_path("prometheus.yml"), *data = tmp_path("data"), *log = tmp_path("prometheus.log");
	char yml[512];
	int n = snprintf(yml, sizeof(yml),
			 "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
			 "scrape_configs:\n  - job_name: stepprof\n    honor_labels: true\n"
			 "    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
			 port);
	cr_assert_eq(sp_t_write_file(conf, yml, (size_t)n), 0);
	char *a_conf, *a_data, *a_listen;
	cr_assert_geq(asprintf(&a_conf, "--config.file=%s", conf), 0);
	cr_assert_geq(asprintf(&a_data, "--storage.tsdb.path=%s", data), 0);
	cr_assert_geq(asprintf(&a_listen, "--web.listen-address=127.0.0.1:%d", pport), 0);
	long long t0 = mono_ms();
	pid_t ppid = spawn((char *[]){prometheus, a_conf, a_data, a_listen, NULL}, NULL, log);

	struct sp_json *j = NULL, *mine = NULL;
	long long up_ms = -1;
	while (mono_ms() - t0 < 30000 && !mine) {
		usleep(250000);
		cr_assert(alive(ppid), "prometheus exited:\n%s", log_tail(log));
		char *body = go_get(pport, "/api/v1/query?query=stepprof_iterations_total");
		if (body && up_ms < 0)
			up_ms = mono_ms() - t0;
		sp_json_free(j);
		j = body ? sp_json_parse(body) : NULL;
		free(body);
		struct sp_json *res = sp_json_path(j, "data.result");
		for (size_t i = 0; res && i < res->n && !mine; i++) {
			const char *rank = sp_json_str(sp_json_at(res, i), "metric.rank");
			if (rank && !strcmp(rank, "0"))
				mine = sp_json_at(res, i);
		}
	}
	long long took = mono_ms() - t0;
	cr_assert_not_null(mine, "no stepprof_iterations_total in Prometheus after %lld ms:\n%s", took, log_tail(log));
	sp_t_note(
	    "watch_prom_tools: prometheus answered its API %lld ms after its start, had the first scrape's sample "
	    "after %lld ms",
	    up_ms, took);
	const char *value = sp_json_str(sp_json_at(sp_json_get(mine, "value"), 1), "");
	cr_expect(value && !strcmp(value, SAMPLE_ITERATIONS), "value %s", value ? value : "(none)");
	const char *job = sp_json_str(mine, "metric.job");
	cr_expect(job && !strcmp(job, SAMPLE_JOB), "job label \"%s\": the escaping did not survive", job ? job : "");
	const char *host = sp_json_str(mine, "metric.host");
	cr_expect(host && !strcmp(host, "node-01"));
	sp_json_free(j);

	/* The scrape itself: healthy, and how long it took. */
	char *targets = go_get(pport, "/api/v1/targets");
	j = targets ? sp_json_parse(targets) : NULL;
	struct sp_json *t = sp_json_at(sp_json_path(j, "data.activeTargets"), 0);
	const char *health = sp_json_str(t, "health");
	cr_expect(health && !strcmp(health, "up"), "target health %s, last error %s", health ? health : "?",
		  sp_json_str(t, "lastError") ? sp_json_str(t, "lastError") : "?");
	sp_t_note("watch_prom_tools: prometheus's last scrape of promserve took %.2f ms",
		  sp_json_num(t, "lastScrapeDuration", -1) * 1e3);
	sp_json_free(j);
	free(targets);
	free(a_conf);
	free(a_data);
	free(a_listen);
	free(conf);
	free(data);
	free(log);
	free(prometheus);
}

/*
 * node_exporter's textfile collector reads the file promserve --prom-file
 * wrote (every other collector off) and exposes each of its samples, with
 * no scrape error.
 */
Test(watch_prom_tools, node_exporter_exposes_the_textfile, .timeout = 60)
{
	char *exporter = need_tool("prometheus-node-exporter", "prometheus-node-exporter");
	char *bin = (char *)sp_t_build("tests/bin/promserve");
	char *dir = tmp_path("textfiles"), *file = tmp_path("textfiles/stepprof.prom"), *log = tmp_path("node.log");
	cr_assert_eq(mkdir(dir, 0755), 0);
	struct sp_t_result res;
	sp_t_run(&res, (char *[]){bin, "--prom-file", file, NULL}, NULL, NULL, 30);
	cr_assert_eq(res.status, 0, "%s", res.err);
	sp_t_result_free(&res);

	int nport = sp_t_free_port();
	char *a_dir, *a_listen;
	cr_assert_geq(asprintf(&a_dir, "--collector.textfile.directory=%s", dir), 0);
	cr_assert_geq(asprintf(&a_listen, "--web.listen-address=127.0.0.1:%d", nport), 0);
	long long t0 = mono_ms();
	pid_t npid =
	    spawn((char *[]){exporter, "--collector.disable-defaults", "--collector.textfile", a_dir, a_listen, NULL},
		  NULL, log);
	char *page = NULL;
	while (!page && mono_ms() - t0 < 20000) {
		usleep(100000);
		cr_assert(alive(npid), "node_exporter exited:\n%s", log_tail(log));
		page = go_get(nport, "/metrics");
	}
	cr_assert_not_null(page, "node_exporter did not answer:\n%s", log_tail(log));
	sp_t_note("watch_prom_tools: node_exporter served the textfile %lld ms after its start", mono_ms() - t0);

	cr_expect_not_null(strstr(page, "\nnode_textfile_scrape_error 0\n"),
			   "the collector could not read the file:\n%s", page);
	/* Every sample of the file, and the escaped job label as it was. */
	size_t len;
	char *text = sp_t_read_file(file, &len);
	int in_file = 0, exposed = 0, found = 0;
	for (char *l = text; l && *l; l = strchr(l, '\n') + 1)
		in_file += !strncmp(l, "stepprof_", 9);
	for (char *l = page; l && *l; l = strchr(l, '\n') + 1) {
		if (strncmp(l, "stepprof_", 9))
			continue;
		exposed++;
		char *eol = strchr(l, '\n');
		*eol = 0;
		if (!strncmp(l, "stepprof_iterations_total{", 26) && strstr(l, "rank=\"0\"") &&
		    strstr(l, SAMPLE_JOB_TEXT) && !strcmp(eol - 5, " " SAMPLE_ITERATIONS))
			found = 1;
		*eol = '\n';
	}
	cr_expect_gt(in_file, 0);
	cr_expect_eq(exposed, in_file, "%d samples in the file, %d exposed:\n%s", in_file, exposed, page);
	cr_expect(found,
		  "no stepprof_iterations_total{...,rank=\"0\"} " SAMPLE_ITERATIONS " with the job label in:\n%s",
		  page);
	free(text);
	free(page);
	free(a_dir);
	free(a_listen);
	free(dir);
	free(file);
	free(log);
	free(bin);
	free(exporter);
}

/* -------------------------------------------------- 4. the watcher itself */

/*
 * `stepprof watch --listen --prom-file` on a running trainer: a Prometheus
 * server of the test's own scrapes the watcher and its query API returns
 * stepprof_iterations_total for the job (labelled with the trace directory's
 * name), growing; promtool accepts what the watcher serves and the textfile
 * it writes; the last textfile counts every iteration the trainer ran.
 */
Test(watch_prom_tools, prometheus_scrapes_the_watcher_of_a_running_job, .timeout = 180)
{
	char *prometheus = need_tool("prometheus", "prometheus");
	char *promtool = need_tool("promtool", "prometheus");
	char *tdir = tmp_path("job-trace"), *prom = tmp_path("job.prom"), *tlog = tmp_path("trainer.log");
	char *wlog = tmp_path("watch.log"), *plog = tmp_path("prometheus.log");
	/* the job: 240 iterations of the clean scenario (about 15 s), preloaded */
	char *env_dir, *env_pre;
	cr_assert_geq(asprintf(&env_dir, "STEPPROF_DIR=%s", tdir), 0);
	env_pre = sp_t_preload_env();
	pid_t job = fork();
	cr_assert_geq(job, 0);
	if (job == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		putenv(env_dir);
		putenv(env_pre);
		int fd = open(tlog, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(sp_t_build("tests/bin/trainer"), "trainer", "--scenario", "clean", "--iters", "240", "--markers",
		      "step", (char *)NULL);
		_exit(127);
	}
	int job_slot = g_nchild;
	g_child[g_nchild++] = job;
	int wport = sp_t_free_port(), pport = sp_t_free_port();
	cr_assert(wport > 0 && pport > 0);
	char listen[64];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", wport);
	pid_t watcher = spawn((char *[]){(char *)sp_t_build("bin/stepprof"), "watch", "--interval", "0.5", "--listen",
					  listen, "--prom-file", prom, tdir, NULL},
			      NULL, wlog);
	char *conf = tmp_path("prometheus.yml"), *data = tmp_path("data");
	char yml[512];
	int n = snprintf(yml, sizeof(yml),
			 "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
			 "scrape_configs:\n  - job_name: stepprof\n    honor_labels: true\n"
			 "    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
			 wport);
	cr_assert_eq(sp_t_write_file(conf, yml, (size_t)n), 0);
	char *a_conf, *a_data, *a_listen;
	cr_assert_geq(asprintf(&a_conf, "--config.file=%s", conf), 0);
	cr_assert_geq(asprintf(&a_data, "--storage.tsdb.path=%s", data), 0);
	cr_assert_geq(asprintf(&a_listen, "--web.listen-address=127.0.0.1:%d", pport), 0);
	pid_t pp = spawn((char *[]){prometheus, a_conf, a_data, a_listen, NULL}, NULL, plog);
	/* the iteration count as Prometheus has it, until it has grown past 0 twice */
	double first = -1, last = -1;
	long long t0 = mono_ms();
	while (mono_ms() - t0 < 60000 && !(first > 0 && last > first)) {
		usleep(500000);
		cr_assert(alive(pp), "prometheus exited:\n%s", log_tail(plog));
		char *body = go_get(pport, "/api/v1/query?query=stepprof_iterations_total");
		struct sp_json *j = body ? sp_json_parse(body) : NULL;
		struct sp_json *res = sp_json_at(sp_json_path(j, "data.result"), 0);
		const char *job_label = sp_json_str(res, "metric.job");
		const char *v = sp_json_str(sp_json_at(sp_json_get(res, "value"), 1), "");
		if (v && job_label && !strcmp(job_label, "job-trace")) {
			double x = atof(v);
			if (first <= 0)
				first = x;
			last = x;
		}
		sp_json_free(j);
		free(body);
	}
	sp_t_note("watch_prom_tools: prometheus saw stepprof_iterations_total of the job go from %.0f to %.0f "
		  "(%lld ms)",
		  first, last, mono_ms() - t0);
	cr_expect(first > 0 && last > first, "Prometheus never saw the job's iterations grow (%.0f, %.0f):\n%s\n%s",
		  first, last, log_tail(wlog), log_tail(plog));
	/* promtool on what the watcher serves, while the job runs */
	struct sp_t_http_resp r;
	cr_assert_eq(sp_t_http_get("127.0.0.1", wport, "GET", "/metrics", 5000, &r), 0);
	cr_assert_eq(r.status, 200);
	char *said;
	int st = promtool_check(promtool, r.body, &said);
	cr_expect_eq(st, 0, "promtool check metrics (watcher's /metrics): status %d:\n%s\n%s", st, said, r.body);
	free(said);
	sp_t_http_free(&r);
	/* the job ends, then the watcher by itself; its last textfile counts every iteration */
	int jst;
	cr_assert_eq(waitpid(job, &jst, 0), job);
	g_child[job_slot] = 0; /* reaped: its pid is no longer ours to signal */
	cr_assert(WIFEXITED(jst) && WEXITSTATUS(jst) == 0, "trainer failed:\n%s", log_tail(tlog));
	for (int i = 0; i < 200 && alive(watcher); i++)
		usleep(100000);
	cr_assert(!alive(watcher), "the watcher did not end with the job:\n%s", log_tail(wlog));
	char *text = sp_t_read_file(prom, NULL);
	cr_assert_not_null(text, "no textfile");
	st = promtool_check(promtool, text, &said);
	cr_expect_eq(st, 0, "promtool check metrics (textfile): status %d:\n%s", st, said);
	free(said);
	const char *line = strstr(text, "\nstepprof_iterations_total{");
	cr_assert_not_null(line, "no stepprof_iterations_total in the textfile:\n%s", text);
	const char *val = strchr(line + 1, '}');
	cr_expect(val && atof(val + 1) == 240, "the textfile's last count: %s", val ? val + 1 : "?");
	free(text);
	free(a_conf);
	free(a_data);
	free(a_listen);
	free(conf);
	free(data);
	free(env_dir);
	free(env_pre);
	free(tdir);
	free(prom);
	free(tlog);
	free(wlog);
	free(plog);
	free(prometheus);
	free(promtool);
}
