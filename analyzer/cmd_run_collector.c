/*
 * cmd_run_collector.c - the eBPF collector of `stepprof run`: stepprof-bpf
 * started on the job child, waited for until it says "ready" (or fails, or the
 * job dies first), its output passed on, and stopped once the job has ended
 * (SIGTERM: it flushes its trace file).
 */
#include "cmd_run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * Has the job (our child) ended, killed by a signal while it waited for the
 * attach? Not reaped: wait_job does that.
 */
int job_gone(pid_t job)
{
	siginfo_t si;
	si.si_pid = 0;
	return waitid(P_PID, (id_t)job, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == job;
}

/* First line of text, trimmed, for a one-line reason. */
static void first_line(char *s)
{
	char *nl = strchr(s, '\n');
	if (nl)
		*nl = 0;
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\r' || s[n - 1] == ' '))
		s[--n] = 0;
}

/*
 * Start the collector on the job child and wait until it says "ready". Returns
 * 0 when attached; 1 when the job died meanwhile (a signal forwarded to it:
 * nothing left to trace, the collector is stopped); otherwise -1 with the
 * reason in why.
 */
int collector_start(struct collector *c, const char *path, pid_t job, const char *dir, int ready_s, char *why,
		    size_t whylen)
{
	int out[2], err[2];
	char pidbuf[16];
	c->pid = -1;
	c->out = c->err = -1;
	if (pipe2(out, O_CLOEXEC) != 0)
		goto fail_errno;
	if (pipe2(err, O_CLOEXEC) != 0) {
		close(out[0]);
		close(out[1]);
		goto fail_errno;
	}
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)job);
	pid_t parent = getpid();
	c->pid = fork();
	if (c->pid < 0) {
		close(out[0]), close(out[1]), close(err[0]), close(err[1]);
		goto fail_errno;
	}
	if (c->pid == 0) {
		/* Its own process group: a Ctrl-C at the terminal stops the job, not the collector. */
		setpgid(0, 0);
		/* Should stepprof run be killed, the collector flushes and leaves (not tracing on, orphaned). */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		dup2(out[1], 1);
		dup2(err[1], 2);
		execl(path, "stepprof-bpf", "--pid", pidbuf, "-o", dir, (char *)NULL);
		fprintf(stderr, "cannot execute %s: %s\n", path, strerror(errno));
		_exit(1);
	}
	close(out[1]);
	close(err[1]);
	c->out = out[0];
	c->err = err[0];

	char obuf[256] = "", ebuf[512] = "";
	size_t olen = 0, elen = 0;
	int open_fds = 2;
	time_t deadline = time(NULL) + ready_s;
	while (open_fds > 0 && !strstr(obuf, "ready\n")) {
		struct pollfd p[2] = { { c->out, POLLIN, 0 }, { c->err, POLLIN, 0 } };
		int left = (int)(deadline - time(NULL));
		if (left <= 0) {
			snprintf(why, whylen, "the collector did not attach within %d s", ready_s);
			/* Reaped and forgotten here: left to wait_job, it was "exited early (status 137)". */
			kill(c->pid, SIGKILL);
			waitpid(c->pid, NULL, 0);
			c->pid = -1;
			if (c->out >= 0)
				close(c->out);
			if (c->err >= 0)
				close(c->err);
			c->out = c->err = -1;
			return -1;
		}
		if (job_gone(job)) {
			/* What it would still say (a late "ready", "no process") is of no use now. */
			if (c->out >= 0)
				close(c->out);
			if (c->err >= 0)
				close(c->err);
			c->out = c->err = -1;
			collector_stop(c);
			return 1;
		}
		/* Woken at least every 100 ms to look at the job: its death makes no noise here. */
		if (poll(p, 2, left > 1 ? 100 : left * 1000) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents && c->out >= 0) {
			ssize_t r = olen < sizeof(obuf) - 1 ? read(c->out, obuf + olen, sizeof(obuf) - 1 - olen) : 0;
			if (r <= 0) {
				close(c->out);
				c->out = -1;
				open_fds--;
			} else {
				olen += (size_t)r;
				obuf[olen] = 0;
			}
		}
		if (p[1].revents && c->err >= 0) {
			ssize_t r = elen < sizeof(ebuf) - 1 ? read(c->err, ebuf + elen, sizeof(ebuf) - 1 - elen) : 0;
			if (r <= 0) {
				close(c->err);
				c->err = -1;
				open_fds--;
			} else {
				elen += (size_t)r;
				ebuf[elen] = 0;
			}
		}
		if (c->out < 0)
			p[0].fd = -1;
	}
	if (strstr(obuf, "ready\n")) {
		/* Anything it said on stderr while starting is passed on. */
		if (elen)
			fputs(ebuf, stderr);
		return 0;
	}
	int st = 0;
	waitpid(c->pid, &st, 0);
	c->pid = -1;
	first_line(ebuf);
	if (*ebuf)
		snprintf(why, whylen, "%s", ebuf);
	else if (WIFSIGNALED(st))
		snprintf(why, whylen, "the collector was killed by signal %d", WTERMSIG(st));
	else
		snprintf(why, whylen, "the collector exited with status %d", WEXITSTATUS(st));
	return -1;

fail_errno:
	snprintf(why, whylen, "cannot start the collector: %s", strerror(errno));
	return -1;
}

/* Pass on what the collector prints; close a side at EOF. */
void collector_drain(struct collector *c, int timeout_ms)
{
	struct pollfd p[2] = { { c->out, POLLIN, 0 }, { c->err, POLLIN, 0 } };
	if (c->out < 0 && c->err < 0) {
		if (timeout_ms > 0)
			poll(NULL, 0, timeout_ms);
		return;
	}
	if (poll(p, 2, timeout_ms) <= 0)
		return;
	for (int i = 0; i < 2; i++) {
		int *fd = i ? &c->err : &c->out;
		if (*fd < 0 || !p[i].revents)
			continue;
		char buf[4096];
		ssize_t r = read(*fd, buf, sizeof(buf));
		if (r <= 0) {
			close(*fd);
			*fd = -1;
		} else if (fwrite(buf, 1, (size_t)r, stderr) != (size_t)r) {
			/* our stderr is gone: keep draining so the collector never blocks */
		}
	}
}

/* SIGTERM, then wait (draining) for it to flush; SIGKILL after COLLECTOR_STOP_S. */
void collector_stop(struct collector *c)
{
	if (c->pid <= 0) {
		/* Already gone: pass on its last words. */
		while (c->out >= 0 || c->err >= 0)
			collector_drain(c, 100);
		return;
	}
	kill(c->pid, SIGTERM);
	time_t deadline = time(NULL) + COLLECTOR_STOP_S;
	int st;
	for (;;) {
		pid_t r = waitpid(c->pid, &st, WNOHANG);
		if (r == c->pid || (r < 0 && errno != EINTR))
			break;
		if (time(NULL) >= deadline) {
			fprintf(stderr, "stepprof: run: the eBPF collector did not stop within %d s; killed\n",
				COLLECTOR_STOP_S);
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &st, 0);
			break;
		}
		collector_drain(c, 50);
	}
	while (c->out >= 0 || c->err >= 0)
		collector_drain(c, 100);
	c->pid = -1;
}

