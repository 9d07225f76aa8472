/*
 * promserve.c - build/tests/bin/promserve: the Prometheus side of `stepprof
 * watch` (analyzer/watch_prom.c, watch_httpd.c) on a fixed sample snapshot,
 * for the end-to-end tests (tests/e2e/test_watch_prom.c) and for trying
 * Prometheus, promtool or node_exporter against it by hand.
 *
 *   promserve --listen ADDR [options]    print the bound port on stdout, serve
 *                                        GET /metrics until SIGTERM or SIGINT
 *   promserve --prom-file FILE [options] write the textfile once
 *   promserve --print [options]          the exposition on stdout
 *
 * Options: --job NAME (the job label; default a name with a quote, a backslash
 * and a line feed, to exercise the escaping), --ranks N (2 by default; many
 * ranks make a body of megabytes, to test partial writes).
 *
 * The sample: rank r has 1234+r iterations of 0.25 s, devices 0 and 1 (the
 * capacity of device 0 known only), alert memory_high on for rank 0; the last
 * rank has NaN quantiles. Exit status 0, 1 on a usage error, 2 when the server
 * or the file fails (one line on stderr).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch_metrics.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static struct watch_rank_metrics *sample_ranks(size_t n)
{
	struct watch_rank_metrics *r = calloc(n, sizeof(*r));
	if (!r)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		r[i].rank = (int)i;
		r[i].iterations = 1234 + i;
		r[i].step_seconds_sum = 0.25 * (double)r[i].iterations;
		for (int q = 0; q < WATCH_NQ; q++)
			r[i].step_quantile[q] = (i + 1 == n && n > 1) ? NAN : 0.25 + 0.01 * q;
		for (int p = 0; p < WATCH_PHASES; p++)
			r[i].phase_seconds[p] = r[i].step_seconds_sum * (p + 1) / 21.0;
		r[i].dev_mask = 0x3;
		r[i].dev_live[0] = 1ull << 30;
		r[i].dev_peak[0] = 3ull << 29;
		r[i].dev_capacity[0] = 80ull << 30;
		r[i].dev_live[1] = 4096;
		r[i].dev_peak[1] = 8192;
		r[i].lost_records = i;
		r[i].alert[WATCH_A_MEMORY_HIGH] = i == 0;
	}
	return r;
}

static int usage(void)
{
	fprintf(stderr, "usage: promserve (--listen ADDR | --prom-file FILE | --print) [--job NAME] [--ranks N]\n");
	return 1;
}

int main(int argc, char **argv)
{
	const char *listen = NULL, *file = NULL;
	int print = 0;
	struct watch_metrics m = {
	    .job = "train \"resnet\" C:\\runs\nnext",
	    .host = "node-01",
	    .version = "0.0-test",
	    .nranks = 2,
	    .scrape_lag_seconds = 0.125,
	};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc)
			listen = argv[++i];
		else if (!strcmp(argv[i], "--prom-file") && i + 1 < argc)
			file = argv[++i];
		else if (!strcmp(argv[i], "--print"))
			print = 1;
		else if (!strcmp(argv[i], "--job") && i + 1 < argc)
			m.job = argv[++i];
		else if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
			m.nranks = strtoul(argv[++i], NULL, 10);
		else
			return usage();
	}
	if (!!listen + !!file + print != 1)
		return usage();
	struct watch_rank_metrics *ranks = sample_ranks(m.nranks);
	if (!ranks)
		return 2;
	m.ranks = ranks;

	char err[512];
	int rc = 0;
	if (print || file) {
		if (print && watch_prom_write(stdout, &m) != 0)
			rc = 2;
		if (file && watch_prom_file(file, &m, err, sizeof(err)) != 0) {
			fprintf(stderr, "promserve: %s\n", err);
			rc = 2;
		}
		free(ranks);
		return rc;
	}

	char *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);
	if (!f || watch_prom_write(f, &m) != 0 || fclose(f) != 0)
		return 2;

	/* No SA_RESTART: the signal ends poll() with EINTR and serve returns. */
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	struct watch_httpd *h;
	if (watch_httpd_open(listen, &h, err, sizeof(err)) != 0) {
		fprintf(stderr, "promserve: %s\n", err);
		free(body);
		free(ranks);
		return 2;
	}
	printf("%d\n", watch_httpd_port(h));
	fflush(stdout);
	while (!stop)
		if (watch_httpd_serve(h, 1000, body, len) != 0) {
			perror("promserve: serve");
			rc = 2;
			break;
		}
	watch_httpd_close(h);
	free(body);
	free(ranks);
	return rc;
}
