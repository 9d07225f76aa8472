/*
 * markgen.c - a workload for the recorder's tests and benchmark: threads that
 * call stepprof_mark()/stepprof_step() a known number of times, then fork,
 * exec, crash or exit in the way a test asks for.
 *
 * stepprof_* are looked up with dlsym(RTLD_DEFAULT): without the preload the
 * calls are no-ops and the program behaves the same (that is tested too).
 *
 *   markgen [options]
 *     -t T     threads writing marks (default 1; 1 = the main thread itself)
 *     -n N     marks per thread (default 1000)
 *     -m NAME  mark name (default "mark"); with -P the names are NAME0..NAME<P-1>
 *     -P P     phases: mark i of a thread is named NAME<i*P/N> (to see which survive a ring)
 *     -L       one more mark per thread at its end, named "last"
 *     -B       with -t: each thread writes its first mark, then waits for all the
 *              others to have written theirs before the rest (all hold a chunk at once)
 *     -s S     stepprof_step() calls after the marks (main thread)
 *     -f M     then fork: the child writes M marks "child" and exits 0; the parent
 *              waits and writes M marks "after"
 *     -S       with -f: the child's marks take the threads' name (-m) instead of
 *              "child" (a name the parent already interned before the fork)
 *     -e M     then fork and exec self in the child: it writes M marks "exec"
 *     -x M     then exec self in place (same pid): M marks "exec"
 *     -R M     then remove the trace directory ($STEPPROF_DIR, as a job's clean-up
 *              would, while the process still runs) and write M marks "after_rm"
 *     -X N     then exec self in place N times in a row (same pid), each image writing
 *              one mark "exec" (a program that execs itself again and again)
 *     -C M     then make every fd 3..1023 a copy of a new file $MARKGEN_FILE (as a
 *              daemon closing and reusing descriptors would), write M marks
 *              "afterclose" and print "user_size=<bytes of that file>"
 *     -F B     before anything, set the soft file size limit (RLIMIT_FSIZE) to B bytes
 *     -G B     after the threads' marks, set it to B bytes and write N marks "after_limit"
 *     -M MiB   after the marks, map and touch MiB of anonymous memory; print "alloc=ok"
 *              or "alloc=failed" (what an address space limit leaves the program)
 *     -K       with -M: keep that memory mapped, so that the exit unmaps it (a process
 *              whose exit takes a while after its last thread has left)
 *     -O M     then clone(SIGCHLD) by the raw syscall (no atfork handlers run): the child
 *              writes M marks "child" and exits 0 (exit: its destructors run), the
 *              parent writes M marks "after" meanwhile, then waits; prints child=<pid>
 *     -U M     then truncate this process's own trace file to 0 bytes (found in
 *              /proc/self/maps) and write M marks "after_trunc"
 *     -k K     SIGKILL self after K marks (main thread, one thread only)
 *     -I US    with one thread: while it writes its marks, another thread sends it
 *              SIGUSR1 every US microseconds; the handler calls stepprof_mark("sig")
 *              (a record made while the thread may be making its own). Prints
 *              "signals=<handler calls>" (each one mark "sig" or, counted, a lost record)
 *     -Y F     with -I: the first F handler calls also fork() (in the handler); the child
 *              returns from the handler into whatever its thread was doing (a mark, the
 *              trace file's creation), writes 10 marks "sigchild" and _exits 0. The parent
 *              prints "sigforks=<forks> bad=<children that did not exit 0>"
 *     -W N     name race: N rounds of two marks, "xxxxxxxxAAAAAAA" then "xxxxxxxxBBBBBBB"
 *              (the same first 8 bytes), while SIGALRM every 20 us marks
 *              "yyyyyyyyBBBBBBB" (the same last 8) from its handler, rewriting the
 *              thread's name cache under a mark comparing its name with it; prints
 *              "alarms=<handler calls>"
 *     -r RATE  with -t 1: the marks paced at RATE a second (bursts of 1000, then a sleep
 *              to the pace), for a live job at a known record rate
 *     -E K     with -r: a stepprof_step() after every K marks (iterations of K marks)
 *     -q       end with _exit(0): no destructors, no atexit handlers
 *     -c CODE  exit status (default 0)
 *     -b N     benchmark: ns per call of an empty function, of stepprof_mark and of
 *              clock_gettime(CLOCK_MONOTONIC) (the floor of any timestamped record),
 *              each through a function pointer, N calls each in interleaved rounds of
 *              at most 30,000 calls (at least 9 rounds); the best round of each counts;
 *              then N marks in one loop by the thread's CPU time ("whole_ns", added ns)
 * Prints "markgen pid=<pid> marks=<total written by this process>" (and
 * "child=<pid>" lines) on stdout, and "errno_changed=N" if N marks changed errno.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef void (*mark_fn)(const char *);
typedef void (*step_fn)(void);

static mark_fn do_mark;
static step_fn do_step;
static long nmarks = 1000, phases, kill_after = -1, pace_rate, step_every;
static int last_mark, child_same_name, use_barrier;
static pthread_barrier_t start_barrier;
static long errno_changed; /* marks after which errno was not what it was before */
static const char *base = "mark";

static void no_mark(const char *name)
{
	(void)name;
}

static void no_step(void)
{
}

/* -Y: forks left to make in the handler, the children made, and "this is such a child" */
static volatile long sig_forks_left, sig_nkids;
static volatile pid_t sig_kids[4096];
static volatile sig_atomic_t sig_child;

static void sig_child_exit(void)
{
	for (int i = 0; i < 10; i++)
		do_mark("sigchild");
	_exit(0);
}

static void *writer(void *arg)
{
	(void)arg;
	char names[64][80];
	long p = phases > 0 ? phases : 1;
	if (p > 64)
		p = 64;
	for (long k = 0; k < p; k++) {
		if (phases > 0)
			snprintf(names[k], sizeof(names[k]), "%s%ld", base, k);
		else
			snprintf(names[k], sizeof(names[k]), "%s", base);
	}
	for (long i = 0; i < nmarks; i++) {
		errno = 77; /* the recorder must leave errno alone, slow paths included */
		do_mark(names[phases > 0 ? i * p / nmarks : 0]);
		if (__builtin_expect(sig_child, 0))
			sig_child_exit();
		if (errno != 77)
			__atomic_add_fetch(&errno_changed, 1, __ATOMIC_RELAXED);
		if (i == 0 && use_barrier)
			pthread_barrier_wait(&start_barrier);
		if (i + 1 == kill_after) {
			fflush(stdout);
			kill(getpid(), SIGKILL);
		}
		if (step_every && (i + 1) % step_every == 0)
			do_step();
		if (pace_rate && (i + 1) % 1000 == 0) {
			static struct timespec t0;
			if (!t0.tv_sec)
				clock_gettime(CLOCK_MONOTONIC, &t0);
			/* the time mark i+1 is due at the pace: sleep until then */
			double due = (double)(i + 1) / (double)pace_rate;
			struct timespec at = t0;
			at.tv_sec += (time_t)due;
			at.tv_nsec += (long)((due - (double)(long)due) * 1e9);
			if (at.tv_nsec >= 1000000000) {
				at.tv_sec++;
				at.tv_nsec -= 1000000000;
			}
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
		}
	}
	if (last_mark)
		do_mark("last");
	return NULL;
}

static void marks_named(const char *name, long n)
{
	for (long i = 0; i < n; i++)
		do_mark(name);
}

static void exec_self(long m)
{
	char arg[32];
	snprintf(arg, sizeof(arg), "%ld", m);
	char *argv[] = {"markgen", "-n", arg, "-m", "exec", NULL};
	execv("/proc/self/exe", argv);
	perror("markgen: exec");
	_exit(127);
}

static void exec_chain(long n)
{
	char arg[32];
	snprintf(arg, sizeof(arg), "%ld", n);
	char *argv[] = {"markgen", "-n", "1", "-m", "exec", "-X", arg, NULL};
	execv("/proc/self/exe", argv);
	perror("markgen: exec");
	_exit(127);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The soft file size limit (`ulimit -f`); the hard one stays. */
/* -I: the main thread's marks interrupted by a signal whose handler marks too */
static volatile long sig_handled;
static volatile int sig_stop;

static void on_sigusr1(int sig)
{
	(void)sig;
	int e = errno;
	do_mark("sig");
	sig_handled++;
	if (sig_forks_left > 0 && sig_nkids < 4096) {
		sig_forks_left--;
		pid_t p = fork();
		if (p == 0)
			sig_child = 1; /* back into the interrupted code, then out at the writer's next check */
		else if (p > 0)
			sig_kids[sig_nkids++] = p;
	}
	errno = e;
}

struct ping {
	pthread_t target;
	long us;
};

static void *pinger(void *arg)
{
	const struct ping *p = arg;
	while (!sig_stop) {
		pthread_kill(p->target, SIGUSR1);
		usleep((useconds_t)p->us);
	}
	return NULL;
}

static void set_fsize(long long bytes)
{
	struct rlimit r;
	getrlimit(RLIMIT_FSIZE, &r);
	r.rlim_cur = (rlim_t)bytes;
	if (r.rlim_max != RLIM_INFINITY && r.rlim_cur > r.rlim_max)
		r.rlim_cur = r.rlim_max;
	if (setrlimit(RLIMIT_FSIZE, &r) != 0)
		perror("markgen: setrlimit");
}

static __attribute__((noinline)) void empty(const char *name)
{
	__asm__ volatile("" : : "r"(name) : "memory");
}

static __attribute__((noinline)) void clock_only(const char *name)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	__asm__ volatile("" : : "r"(name), "r"(&t) : "memory");
}

static double one_round(mark_fn fn, long n)
{
	double t0 = now_s();
	for (long i = 0; i < n; i++)
		fn("bench");
	return (now_s() - t0) / (double)n * 1e9;
}

/*
 * Rounds interleaved (empty, mark, clock, empty, ...) so that a load change on the
 * machine hits the three alike; the best round of each is kept. RATIONALE: short
 * rounds (about 1 ms) so that on a loaded machine some rounds run without being
 * preempted; each still spans several 64 KiB chunks of the trace, so the cost of
 * starting a chunk is in the figure.
 */
static void bench_all(long n, double *empty_ns, double *mark_ns, double *clock_ns)
{
	mark_fn fns[3] = {empty, do_mark, clock_only};
	double best[3] = {1e9, 1e9, 1e9};
	long per = n / 9 + 1;
	if (per > 30000)
		per = 30000;
	long rounds = n / per > 9 ? n / per : 9;
	for (long r = 0; r < rounds; r++)
		for (int k = 0; k < 3; k++) {
			double t = one_round(fns[k], per);
			if (t < best[k])
				best[k] = t;
		}
	*empty_ns = best[0], *mark_ns = best[1], *clock_ns = best[2];
}

static volatile sig_atomic_t race_alarms;

static void race_alarm(int sig)
{
	(void)sig;
	int e = errno;
	do_mark("yyyyyyyyBBBBBBB");
	race_alarms++;
	errno = e;
}

static void name_race(long n)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = race_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, 20}, {0, 20}}, off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &it, NULL);
	for (long i = 0; i < n; i++) {
		do_mark("xxxxxxxxAAAAAAA");
		do_mark("xxxxxxxxBBBBBBB");
	}
	setitimer(ITIMER_REAL, &off, NULL);
	printf("alarms=%ld\n", (long)race_alarms);
}

/* The trace file this process maps (the preload's), cut to 0 bytes as another program could. */
static void truncate_own_trace(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4600];
	int done = 0;
	while (f && !done && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');
		size_t n = strlen(line);
		if (n && line[n - 1] == '\n')
			line[--n] = 0;
		if (p && n > 8 && strcmp(line + n - 8, ".sptrace") == 0)
			done = syscall(SYS_truncate, p, 0) == 0;
	}
	if (f)
		fclose(f);
	printf("truncated=%d\n", done);
}

int main(int argc, char **argv)
{
	long nthreads = 1, steps = 0, fork_m = -1, exec_m = -1, inplace_m = -1, bench = 0, close_m = -1, chain = 0,
	     rm_m = -1, clone_m = -1, trunc_m = -1;
	long long fsize_at_start = -1, fsize_after = -1;
	long alloc_mib = -1, sig_us = -1, race_n = 0;
	int quick = 0, code = 0, keep_alloc = 0, opt;
	while ((opt = getopt(argc, argv, "t:n:m:P:LSBs:f:e:x:X:R:C:k:qc:b:F:G:M:KI:Y:W:O:U:r:E:")) != -1) {
		switch (opt) {
		case 't':
			nthreads = atol(optarg);
			break;
		case 'n':
			nmarks = atol(optarg);
			break;
		case 'm':
			base = optarg;
			break;
		case 'P':
			phases = atol(optarg);
			break;
		case 'L':
			last_mark = 1;
			break;
		case 'S':
			child_same_name = 1;
			break;
		case 'B':
			use_barrier = 1;
			break;
		case 's':
			steps = atol(optarg);
			break;
		case 'f':
			fork_m = atol(optarg);
			break;
		case 'e':
			exec_m = atol(optarg);
			break;
		case 'x':
			inplace_m = atol(optarg);
			break;
		case 'C':
			close_m = atol(optarg);
			break;
		case 'k':
			kill_after = atol(optarg);
			break;
		case 'R':
			rm_m = atol(optarg);
			break;
		case 'X':
			chain = atol(optarg);
			break;
		case 'Y':
			sig_forks_left = atol(optarg);
			break;
		case 'I':
			sig_us = atol(optarg);
			break;
		case 'q':
			quick = 1;
			break;
		case 'r':
			pace_rate = atol(optarg);
			break;
		case 'E':
			step_every = atol(optarg);
			break;
		case 'W':
			race_n = atol(optarg);
			break;
		case 'c':
			code = atoi(optarg);
			break;
		case 'b':
			bench = atol(optarg);
			break;
		case 'F':
			fsize_at_start = atoll(optarg);
			break;
		case 'G':
			fsize_after = atoll(optarg);
			break;
		case 'M':
			alloc_mib = atol(optarg);
			break;
		case 'K':
			keep_alloc = 1;
			break;
		case 'O':
			clone_m = atol(optarg);
			break;
		case 'U':
			trunc_m = atol(optarg);
			break;
		default:
			fprintf(stderr, "markgen: bad option (see the source)\n");
			return 2;
		}
	}
	if (fsize_at_start >= 0)
		set_fsize(fsize_at_start);
	do_mark = (mark_fn)dlsym(RTLD_DEFAULT, "stepprof_mark");
	do_step = (step_fn)dlsym(RTLD_DEFAULT, "stepprof_step");
	if (!do_mark)
		do_mark = no_mark;
	if (!do_step)
		do_step = no_step;

	if (race_n > 0) {
		name_race(race_n);
		return 0;
	}
	if (bench > 0) {
		double base_ns, mark_ns, clock_ns;
		bench_all(bench, &base_ns, &mark_ns, &clock_ns);
		/*
		 * And N marks more in one loop, timed by the thread's CPU clock: the
		 * mean a job pays, every chunk start included. The best round above
		 * leaves out a round whose chunk starts were slow (on a VM, a fresh
		 * page of the trace may cost microseconds); CPU time leaves out the
		 * time the thread waited for a CPU on a loaded machine.
		 */
		struct timespec c0, c1;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
		for (long i = 0; i < bench; i++)
			do_mark("bench");
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
		double whole = ((double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec)) / (double)bench;
		printf("empty_ns=%.2f mark_ns=%.2f added_ns=%.2f clock_ns=%.2f whole_ns=%.2f\n", base_ns, mark_ns,
		       mark_ns - base_ns, clock_ns - base_ns, whole - base_ns);
		return 0;
	}

	long total = 0;
	if (nthreads <= 1 && sig_us > 0) {
		struct sigaction sa = {0};
		sa.sa_handler = on_sigusr1;
		sa.sa_flags = SA_RESTART;
		sigaction(SIGUSR1, &sa, NULL);
		struct ping arg = {pthread_self(), sig_us};
		pthread_t p;
		pthread_create(&p, NULL, pinger, &arg);
		use_barrier = 0;
		writer(NULL);
		sigset_t block;
		sigemptyset(&block);
		sigaddset(&block, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &block, NULL); /* one sent after the marks: not handled, not counted */
		if (sig_child)
			sig_child_exit(); /* forked by a signal after the last mark */
		sig_stop = 1;
		pthread_join(p, NULL);
		printf("signals=%ld\n", sig_handled);
		if (sig_nkids) {
			long bad = 0;
			for (long i = 0; i < sig_nkids; i++) {
				int st = 0;
				if (waitpid(sig_kids[i], &st, 0) != sig_kids[i] || !WIFEXITED(st) || WEXITSTATUS(st)) {
					if (!bad)
						printf("bad_status=%#x\n", st);
					bad++;
				}
			}
			printf("sigforks=%ld bad=%ld\n", (long)sig_nkids, bad);
		}
	} else if (nthreads <= 1) {
		use_barrier = 0; /* nobody to wait for */
		writer(NULL);
	} else {
		pthread_t th[256];
		if (nthreads > 256)
			nthreads = 256;
		if (use_barrier && nmarks > 0)
			pthread_barrier_init(&start_barrier, NULL, (unsigned)nthreads);
		else
			use_barrier = 0;
		for (long i = 0; i < nthreads; i++)
			pthread_create(&th[i], NULL, writer, NULL);
		for (long i = 0; i < nthreads; i++)
			pthread_join(th[i], NULL);
	}
	total += nthreads * (nmarks + last_mark);
	for (long i = 0; i < steps; i++)
		do_step();
	if (alloc_mib >= 0) {
		size_t len = (size_t)alloc_mib << 20;
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED) {
			memset(p, 1, len);
			if (!keep_alloc)
				munmap(p, len);
		}
		printf("alloc=%s\n", p != MAP_FAILED ? "ok" : "failed");
	}
	if (fsize_after >= 0) {
		set_fsize(fsize_after);
		marks_named("after_limit", nmarks);
		total += nmarks;
	}

	if (close_m >= 0) {
		const char *path = getenv("MARKGEN_FILE");
		int fd = path ? open(path, O_RDWR | O_CREAT | O_TRUNC, 0600) : -1;
		if (fd < 0) {
			perror("markgen: MARKGEN_FILE");
			return 2;
		}
		for (int i = 3; i < 1024; i++)
			if (i != fd)
				dup2(fd, i);
		marks_named("afterclose", close_m);
		total += close_m;
		struct stat st;
		fstat(fd, &st);
		printf("user_size=%ld\n", (long)st.st_size);
	}
	if (rm_m >= 0) {
		/* the directory is flat: its files, then itself (no shell: it would write a trace of its own) */
		const char *dir = getenv("STEPPROF_DIR");
		DIR *d = dir ? opendir(dir) : NULL;
		struct dirent *e;
		char path[4200];
		while (d && (e = readdir(d)))
			if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
				snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
				unlink(path);
			}
		if (d)
			closedir(d);
		if (!dir || rmdir(dir) != 0)
			perror("markgen: removing $STEPPROF_DIR");
		marks_named("after_rm", rm_m);
		total += rm_m;
	}
	if (trunc_m >= 0) {
		truncate_own_trace();
		marks_named("after_trunc", trunc_m);
		total += trunc_m;
	}
	if (clone_m >= 0) {
		fflush(stdout);
		long c = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
		if (c == 0) {
			marks_named("child", clone_m);
			printf("markgen pid=%d marks=%ld\n", (int)getpid(), clone_m);
			fflush(stdout);
			exit(0);
		}
		marks_named("after", clone_m);
		total += clone_m;
		int st = 0;
		waitpid((pid_t)c, &st, 0);
		printf("child=%ld child_status=%d\n", c, st);
	}
	if (fork_m >= 0) {
		fflush(stdout);
		pid_t c = fork();
		if (c == 0) {
			marks_named(child_same_name ? base : "child", fork_m);
			printf("markgen pid=%d marks=%ld\n", (int)getpid(), fork_m);
			fflush(stdout);
			_exit(0);
		}
		int st;
		waitpid(c, &st, 0);
		printf("child=%d\n", (int)c);
		marks_named("after", fork_m);
		total += fork_m;
	}
	if (exec_m >= 0) {
		fflush(stdout);
		pid_t c = fork();
		if (c == 0)
			exec_self(exec_m);
		int st;
		waitpid(c, &st, 0);
		printf("child=%d\n", (int)c);
	}
	printf("markgen pid=%d marks=%ld\n", (int)getpid(), total);
	if (errno_changed)
		printf("errno_changed=%ld\n", errno_changed);
	fflush(stdout);
	if (inplace_m >= 0)
		exec_self(inplace_m);
	if (chain > 0)
		exec_chain(chain - 1);
	if (quick)
		_exit(code);
	return code;
}
