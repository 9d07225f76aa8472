/*
 * iotrace.c - stepprof-bpf, the eBPF input collector: loads iotrace.bpf.c,
 * follows one process tree and writes its file opens, stats, reads, directory
 * listings and closes into a trace file of its own (format v1, SP_FEAT_BPF).
 *
 *   stepprof-bpf --pid PID -o DIR [--duration S] [--verbose]
 *
 * Prints "ready" on stdout once attached; exits 0 on SIGTERM/SIGINT/SIGHUP, after S
 * seconds, or when the whole traced tree has exited, having flushed its file.
 * When BPF cannot be used it prints one line with the reason on stderr and
 * exits 1 (`stepprof run` then falls back to the libc wrappers).
 *
 * This file is the loader: options, checks before loading, the trace file,
 * and main: open -> configure -> load -> attach -> poll, one cleanup label.
 * The traced processes and their fd tables are in proctree.c, the records
 * written from the events in emit.c (iotrace_user.h).
 */
#include "envconfig.h"
#include "iotrace_user.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "iotrace.skel.h"

#define POLL_MS	    10	/* ring drain period: events wait at most this long in the ring */
#define LIVENESS_MS 500 /* how often the traced processes are checked for a missed exit */

#ifndef SYS_dup2
#define SYS_dup2 (-1000) /* architectures without it (arm64) have only dup3; never a syscall number (nor -1) */
#endif

_Static_assert(IOTRACE_F_DUPFD == F_DUPFD && IOTRACE_F_DUPFD_CLOEXEC == F_DUPFD_CLOEXEC, "fcntl's dup commands");
_Static_assert(IOTRACE_O_ACCMODE == O_ACCMODE && IOTRACE_O_WRONLY == O_WRONLY && IOTRACE_O_TRUNC == O_TRUNC,
	       "the open flags of an output file");

static volatile sig_atomic_t stop;
static bool verbose;
static char libbpf_last[256]; /* libbpf's last warning: the reason of a failed load */

/* The syscall number of each traced call (api_sys.def). */
static const long call_nr[IOTRACE_CALL__COUNT] = {
#define SP_API_SYS(id, num, nr, kind) [IOTRACE_##id] = SYS_##nr,
#include "stepprof/api_sys.def"
#undef SP_API_SYS
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Processes whose exit event was lost (full ring) or came before we attached.
 * The dead are found first and removed only after one more drain of the ring,
 * so that the records a process submitted before dying still find its tables.
 */
static void check_liveness(struct collector *c, struct ring_buffer *rb)
{
	int ndead = 0;
	for (size_t i = 0; i < c->procs.cap; i++) {
		struct proc *p = c->procs.vals[i].p;
		if (p && pid_dead(p->pid)) {
			p->dead = true;
			ndead++;
		}
	}
	if (!ndead)
		return;
	ring_buffer__consume(rb);
	for (size_t i = 0; i < c->procs.cap; i++) {
		struct proc *p = c->procs.vals[i].p;
		if (p && p->dead) {
			held_flush_pid(c, p->pid);
			proc_exited(c, p);
			i--; /* deletion may have moved another entry into slot i */
		}
	}
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int on_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && !verbose)
		return 0;
	char line[sizeof(libbpf_last)];
	va_list aq;
	va_copy(aq, ap);
	vsnprintf(line, sizeof(line), fmt, aq);
	va_end(aq);
	line[strcspn(line, "\n")] = 0;
	if (level == LIBBPF_WARN && line[0])
		memcpy(libbpf_last, line, sizeof(line));
	return verbose ? vfprintf(stderr, fmt, ap) : 0;
}

/*
 * The trace directory: made (mode 0700) when missing. An existing directory
 * of another user is accepted when we are root: `sudo stepprof run` makes it
 * for the invoking user, whose job writes there, and only the collector is root.
 * A symbolic link is refused either way.
 */
static int open_trace_dir(const char *dir, struct stat *st, char *err, size_t errlen)
{
	char why[256];
	int rc = sp_tf_mkdir(dir, why, sizeof(why));
	if (rc == -EPERM && geteuid() == 0)
		rc = 0;
	if (rc == 0 && lstat(dir, st) == 0 && S_ISDIR(st->st_mode))
		return 0;
	snprintf(err, errlen, "%s", rc ? why : "not a directory");
	if (!rc)
		snprintf(err, errlen, "%s: not a directory", dir);
	return -1;
}

/* The trace directory's absolute forms into own[2]: as given (made absolute), and resolved (NULL when the same). */
static void own_dirs(const char *dir, char *own[2])
{
	char cwd[PATH_MAX];
	if (dir[0] == '/')
		own[0] = strdup(dir);
	else if (getcwd(cwd, sizeof(cwd)) && asprintf(&own[0], "%s/%s", cwd, dir) < 0)
		own[0] = NULL;
	if (own[0])
		path_normalize(own[0], strlen(own[0]));
	own[1] = realpath(dir, NULL);
	if (own[0] && own[1] && !strcmp(own[0], own[1])) {
		free(own[1]);
		own[1] = NULL;
	}
}

/* The file's cap: STEPPROF_MAX_MB as for the preload's files (4..1048576 MiB), default 1 GiB. */
static void config_warn(const char *var, const char *value, const char *expected)
{
	fprintf(stderr, PROG ": warning: %s=\"%.80s\" is not valid (expected %s); using the default\n", var, value,
		expected);
}

static const char *config_get(const char *name)
{
	return getenv(name);
}

/* The file's cap: STEPPROF_MAX_MB as for the preload's files (config.def). */
static uint64_t max_bytes(void)
{
	struct sp_config cfg;
	sp_config_parse(&cfg, SP_CFG_BPF, config_get, config_warn);
	return (uint64_t)cfg.MAX_MB << 20;
}

static void usage(FILE *to)
{
	fprintf(to, "usage: " PROG " --pid PID -o DIR [--duration SECONDS] [--verbose]\n"
		    "  trace the file input (open/stat/read/getdents/close) of PID and its descendants\n"
		    "  into a stepprof trace file in DIR; prints \"ready\" once attached\n");
}

/*
 * Whether we run in a PID namespace other than the initial one (a container's):
 * the initial one's inode number is fixed (PROC_PID_INIT_INO, Linux >= 3.8).
 * RATIONALE: the kernel side knows tasks by their pids in the initial
 * namespace (task->tgid), --pid and /proc here are the container's: nothing
 * matched, and the collector recorded nothing while saying "ready" (under
 * `stepprof run --bpf` the libc wrappers then stood down: no input at all).
 */
static bool in_child_pid_namespace(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 && st.st_ino != 0xEFFFFFFCu;
}

/*
 * The pid of a running stepprof-bpf that holds map id (an fd on it, in
 * /proc/PID/fdinfo), 0 when none does.
 * RATIONALE: a collector's maps outlive it for a while: the programs that use
 * them are freed after an RCU grace period of tracing programs (up to seconds),
 * so a collector started again at once on the same process (after an error)
 * found the dead one's map and refused.
 */
static int32_t map_holder(uint32_t id)
{
	char path[300], line[128], comm[32];
	int32_t holder = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	for (struct dirent *de; !holder && (de = readdir(d));) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		bool ours = fgets(comm, sizeof(comm), f) && !strcmp(comm, PROG "\n");
		fclose(f);
		snprintf(path, sizeof(path), "/proc/%ld/fdinfo", pid);
		DIR *fds = ours ? opendir(path) : NULL;
		for (struct dirent *fe; fds && !holder && (fe = readdir(fds));) {
			unsigned mid;
			snprintf(path, sizeof(path), "/proc/%ld/fdinfo/%s", pid, fe->d_name);
			if (fe->d_name[0] == '.' || !(f = fopen(path, "re")))
				continue;
			while (fgets(line, sizeof(line), f))
				if (sscanf(line, "map_id: %u", &mid) == 1 && mid == id)
					holder = (int32_t)pid;
			fclose(f);
		}
		if (fds)
			closedir(fds);
	}
	closedir(d);
	return holder;
}

/*
 * The pid of another collector whose map of traced processes (a hash named
 * "traced", u32 -> u8) holds pid, 0 when none does: that collector records
 * pid's calls already, and a second one would record each of them again
 * (two files of the same calls in one directory are counted twice). Called
 * before our own map exists.
 */
static int32_t traced_elsewhere(int32_t pid)
{
	uint32_t id = 0, key = (uint32_t)pid;
	int32_t holder = 0;
	uint8_t val;

	while (!bpf_map_get_next_id(id, &id)) {
		struct bpf_map_info info = {0};
		uint32_t len = sizeof(info);
		int fd = bpf_map_get_fd_by_id(id);
		if (fd < 0)
			continue; /* gone meanwhile */
		bool found = !bpf_obj_get_info_by_fd(fd, &info, &len) && info.type == BPF_MAP_TYPE_HASH &&
			     !strcmp(info.name, "traced") && info.key_size == sizeof(key) &&
			     info.value_size == sizeof(val) && !bpf_map_lookup_elem(fd, &key, &val);
		close(fd);
		if (found && (holder = map_holder(id)))
			return holder;
	}
	return 0;
}

/*
 * Bad usage: one line on stderr, exit status 2 (the usage itself with --help).
 * RATIONALE: as the stepprof verbs do; getopt's own line followed by the three
 * of the usage made four lines of which the error was the first.
 */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (" PROG " --help)\n", stderr);
	return 2;
}

/* The value of option opt (optarg) is not what: one line, exit status 2. */
static int bad_value(const char *opt, const char *what)
{
	fprintf(stderr, PROG ": %s: not %s: %s\n", opt, what, optarg);
	return 2;
}

/* Why the program did not load, in one line. */
static const char *load_reason(int err, char *buf, size_t len)
{
	if (err == -EPERM || (err == -EACCES && geteuid() != 0))
		snprintf(buf, len, "not permitted (%s): run as root, or with CAP_BPF and CAP_PERFMON", strerror(-err));
	else if (libbpf_last[0])
		snprintf(buf, len, "the kernel refused it (%s): %s", strerror(-err), libbpf_last);
	else
		snprintf(buf, len, "%s", strerror(-err));
	return buf;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"pid", required_argument, NULL, 'p'},	{"output", required_argument, NULL, 'o'},
	    {"duration", required_argument, NULL, 'd'}, {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},		{0},
	};
	struct iotrace_bpf *skel = NULL;
	struct ring_buffer *rb = NULL;
	struct collector c = {0};
	bool tf_open = false;
	uint64_t unwritten_lost = 0, lost_calls = 0;
	char *end, reason[512], err[256];
	long pid = 0;
	double duration = 0;
	const char *dir = NULL;
	int opt, ret = 1;

	opterr = 0; /* bad usage is one line, ours */
	while ((opt = getopt_long(argc, argv, "p:o:d:vh", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			pid = strtol(optarg, &end, 10);
			if (*end || pid <= 0 || pid > INT_MAX)
				return bad_value("--pid", "a process id");
			break;
		case 'o':
			dir = optarg;
			break;
		case 'd':
			duration = strtod(optarg, &end);
			if (*end || duration <= 0)
				return bad_value("--duration", "a positive number of seconds");
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			/* a long option as typed; a short one by optopt (it may be inside a cluster, "-vx") */
			if (!strncmp(argv[optind - 1], "--", 2) || !optopt)
				return usage_error("%s: unknown option or missing value", argv[optind - 1]);
			return usage_error("-%c: unknown option or missing value", optopt);
		}
	}
	if (optind != argc)
		return usage_error("%s: unexpected argument", argv[optind]);
	if (!pid || !dir)
		return usage_error("%s is required", !pid ? "--pid PID" : "-o DIR");
	if (pid_dead((int32_t)pid)) {
		fprintf(stderr, PROG ": no process %ld\n", pid);
		return 1;
	}
	pid = thread_group((int32_t)pid); /* a thread's id: its process */
	int32_t other = traced_elsewhere((int32_t)pid);
	if (other) {
		fprintf(stderr,
			PROG
			": process %ld is traced by another stepprof-bpf already (pid %d): a second one would record "
			"each of its calls again\n",
			pid, other);
		return 1;
	}
	if (in_child_pid_namespace()) {
		fprintf(stderr,
			PROG ": cannot trace from inside a PID namespace (a container): the kernel knows its "
			     "processes by other pids; run stepprof-bpf on the host, with the job's pid there\n");
		return 1;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		fprintf(stderr, PROG ": cannot load BPF: the kernel has no BTF (/sys/kernel/btf/vmlinux): %s\n",
			strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	libbpf_set_print(on_libbpf_print);

	/* open -> configure -> load -> attach -> poll */
	skel = iotrace_bpf__open();
	if (!skel) {
		fprintf(stderr, PROG ": cannot open the BPF object: %s\n", load_reason(-errno, reason, sizeof(reason)));
		goto cleanup;
	}
	for (int i = 0; i < IOTRACE_CALL__COUNT; i++) {
		if (call_nr[i] < 0)
			continue; /* not on this architecture (SYS_dup2 on arm64) */
		if (call_nr[i] >= IOTRACE_NR_MAX) {
			fprintf(stderr, PROG ": cannot load BPF: syscall number %ld out of range\n", call_nr[i]);
			goto cleanup;
		}
		skel->rodata->targ_call[call_nr[i]] = (uint8_t)(i + 1);
	}
	skel->rodata->targ_follow = true;
	int ncpus = libbpf_num_possible_cpus();
	if (ncpus <= 0 || bpf_map__set_max_entries(skel->maps.envbufs, (uint32_t)ncpus)) {
		fprintf(stderr, PROG ": cannot load BPF: the number of CPUs is unknown\n");
		goto cleanup;
	}

	int e = iotrace_bpf__load(skel);
	if (e) {
		fprintf(stderr, PROG ": cannot load BPF: %s\n", load_reason(e, reason, sizeof(reason)));
		goto cleanup;
	}
	uint32_t key = (uint32_t)pid;
	uint8_t one = 1;
	if (bpf_map__update_elem(skel->maps.traced, &key, sizeof(key), &one, sizeof(one), BPF_ANY)) {
		fprintf(stderr, PROG ": cannot seed the traced pid: %s\n", strerror(errno));
		goto cleanup;
	}

	struct stat dst;
	if (open_trace_dir(dir, &dst, err, sizeof(err))) {
		fprintf(stderr, PROG ": %s\n", err);
		goto cleanup;
	}
	struct sp_tf_opts to = {.dir = dir,
				.max_bytes = max_bytes(),
				.features = SP_FEAT_BPF,
				.prog = PROG,
				.dir_flags = geteuid() == 0 ? SP_TF_DIR_ANY_OWNER : 0,
				.keep_fd = 1};
	if (sp_tf_create(&c.tf, &to, err, sizeof(err))) {
		fprintf(stderr, PROG ": %s\n", err);
		goto cleanup;
	}
	tf_open = true;
	/* Under sudo the directory is the user's: hand the file to them, so that they can analyze it. */
	if (dst.st_uid != geteuid() && fchown(c.tf.fd, dst.st_uid, dst.st_gid))
		fprintf(stderr, PROG ": warning: %s: cannot give the file to uid %u: %s\n", c.tf.path,
			(unsigned)dst.st_uid, strerror(errno));
	c.strings.tf = &c.tf;
	own_dirs(dir, c.strings.own);
	struct proc *root = proc_get(&c, (int32_t)pid, true);
	proc_scan_fds(&c, root);
	proc_cwd(root); /* now, while it is alive: its children inherit it */
	proc_check_libc_io(&c, root, NULL, 0);

	rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_ring, &c, NULL);
	if (!rb) {
		fprintf(stderr, PROG ": cannot open the ring buffer: %s\n", strerror(errno));
		goto cleanup;
	}
	e = iotrace_bpf__attach(skel);
	if (e) {
		fprintf(stderr, PROG ": cannot attach to the syscall tracepoints: %s\n",
			load_reason(e, reason, sizeof(reason)));
		goto cleanup;
	}

	trace_descendants(&c, skel->maps.traced);

	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* the terminal it was started from hung up (an ssh session lost): flush as for the others, not die */
	sigaction(SIGHUP, &sa, NULL);
	printf("ready\n");
	fflush(stdout);

	/*
	 * Events are submitted without a wakeup: drain the ring every POLL_MS.
	 * The poll still returns at once for the forced wakeup of a process exit.
	 */
	uint64_t t0 = now_ns(), next_check = t0;
	while (!stop) {
		ring_buffer__poll(rb, POLL_MS);
		ring_buffer__consume(rb);
		uint64_t t = now_ns();
		if (duration > 0 && t - t0 >= (uint64_t)(duration * 1e9))
			break;
		if (t >= next_check) {
			check_liveness(&c, rb);
			next_check = t + LIVENESS_MS * 1000000ull;
		}
		if (c.nalive == 0)
			break;
	}
	/* Detached first, so that no program touches the ring or the batches while they are read. */
	iotrace_bpf__detach(skel);
	ring_buffer__consume(rb);
	drain_batches(&c, skel);
	held_flush_pid(&c, -1); /* calls interrupted and not restarted before the end */
	unwritten_lost = write_lost(&c, skel->maps.lost, &lost_calls);
	ret = 0;

cleanup:
	if (tf_open) {
		uint64_t dropped = 0;
		int ncpu = libbpf_num_possible_cpus();
		if (skel && ncpu > 0) {
			uint64_t *v = calloc((size_t)ncpu, sizeof(*v));
			uint32_t zero = 0;
			if (v && !bpf_map__lookup_elem(skel->maps.drops, &zero, sizeof(zero), v, ncpu * sizeof(*v), 0))
				for (int i = 0; i < ncpu; i++)
					dropped += v[i];
			free(v);
		}
		for (size_t i = 0; i < c.streams.cap; i++)
			if (c.streams.keys[i])
				sp_tf_stream_close(c.streams.vals[i].p);
		__atomic_add_fetch(&c.tf.hdr->lost_records, dropped + unwritten_lost, __ATOMIC_RELAXED);
		sp_tf_finish(&c.tf, now_ns());
		/* Written to the end into a file nobody can open: say so, the only trace of the run is this line. */
		struct stat fst;
		int removed = fstat(c.tf.fd, &fst) == 0 && fst.st_nlink == 0;
		if (removed)
			fprintf(stderr,
				PROG
				": warning: %s was removed while tracing (its directory deleted?): %llu records lost\n",
				c.tf.path, (unsigned long long)c.records);
		/* Never silent: the trace says how many (LOST records, the header), and so does this line. */
		if (lost_calls + dropped)
			fprintf(stderr,
				PROG ": warning: %llu calls not recorded (ring buffer full): counted as lost in %s\n",
				(unsigned long long)(lost_calls + dropped), c.tf.path);
		if (verbose)
			fprintf(stderr, PROG ": %llu records, %llu lost, in %s\n", (unsigned long long)c.records,
				(unsigned long long)(lost_calls + dropped), c.tf.path);
		if (!removed)
			sp_tf_compact(&c.tf); /* the file the size of what it holds (one warning if not) */
		sp_tf_release(&c.tf);
	}
	ring_buffer__free(rb);
	iotrace_bpf__destroy(skel);
	free(c.strings.own[0]);
	free(c.strings.own[1]);
	return ret;
}
