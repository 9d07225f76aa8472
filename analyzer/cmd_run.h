/*
 * cmd_run.h - what the files of `stepprof run` share: its exit codes, the job
 * (cmd_run_job.c: the child that becomes CMD, signals, waiting) and the eBPF
 * collector (cmd_run_collector.c); cmd_run.c has the options and the order of
 * things. CLI-side only: no verb of its own (commands.def).
 */
#ifndef STEPPROF_CMD_RUN_H
#define STEPPROF_CMD_RUN_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "envconfig.h"

/* Like env(1) and timeout(1): codes a job rarely uses itself. */
#define RUN_EXIT_FAIL 125   /* stepprof run itself failed: usage, -o DIR, libstepprof.so */
#define RUN_EXIT_NOEXEC 126 /* the command exists but cannot be executed */
#define RUN_EXIT_NOTFOUND 127 /* the command was not found */

#define COLLECTOR_STOP_S 10  /* how long it may take to flush after SIGTERM */

struct job {
	char **argv;
	const char *path; /* argv[0] found on PATH */
	char **sh_argv;	  /* /bin/sh path argv[1..]: a script without #! */
	const char *lib, *dir;
	uid_t uid; /* run as (SUDO_UID when started through sudo as root) */
	gid_t gid;
	int drop;  /* change to uid/gid before exec */
	gid_t groups[64]; /* the user's supplementary groups, looked up by the parent */
	int ngroups;
	char home[PATH_MAX], user[256]; /* the user's HOME and name (USER, LOGNAME), "" when unknown */
	int go_rd, go_wr;   /* parent -> child: 'b' (collector ready), 'f' (it failed: libc) or 'l' (libc) */
	int err_rd, err_wr; /* child -> parent: errno of a failed exec (close-on-exec) */
	pid_t parent;	    /* stepprof run */
	sigset_t mask;	    /* the signal mask stepprof run was started with */
	pid_t pid;
};

struct collector {
	pid_t pid;
	int out, err; /* its stdout and stderr, read by us */
};

/* cmd_run.c */
int is_binary(const char *path);

/* cmd_run_job.c */
extern volatile pid_t run_job_pid;
extern struct sigaction run_pipe_old;
extern struct sigaction run_chld_old;
int writable_by_job(const struct job *j, const char *dir);
void job_child(struct job *j);
void forwardable(sigset_t *set);
void install_forwarding(void);
void follow_stop(pid_t job, int sig);
int wait_job(pid_t job, struct collector *c);
int end_like(int st);

/* cmd_run_collector.c */
int job_gone(pid_t job);
int collector_start(struct collector *c, const char *path, pid_t job, const char *dir, int ready_s, char *why,
		    size_t whylen);
void collector_drain(struct collector *c, int timeout_ms);
void collector_stop(struct collector *c);

/* cmd_run_watch.c */
pid_t watcher_start(const char *dir, const char *opts);
void watcher_stop(pid_t pid);

/* The STEPPROF_* variables `stepprof run` reads (config.def, SP_CFG_RUN), parsed once at its start. */
const struct sp_config *run_config(void);

#endif /* STEPPROF_CMD_RUN_H */
