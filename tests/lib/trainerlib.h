/*
 * trainerlib.h - helpers shared by the end-to-end tests that run the trainer
 * workload (build/tests/bin/trainer) under the preload: the test's directory, the
 * LD_PRELOAD entry, the trainer's ground truth (its last line of output, JSON)
 * and a job of several ranks started at the same time, as torchrun starts a
 * node's ranks.
 */
#ifndef STEPPROF_TRAINERLIB_H
#define STEPPROF_TRAINERLIB_H

#include "testlib.h"

/*
 * The running test's directory (malloc'd, e.g. by sp_t_tmpdir): removed by
 * sp_t_remove_cur_dir, the suite's .fini, also when an assertion stopped the test.
 */
extern char *sp_t_cur_dir;
void sp_t_remove_cur_dir(void);

/* "LD_PRELOAD=<absolute path of build/lib/libstepprof.so>" (malloc'd); asserts it is built. */
char *sp_t_preload_env(void);

/*
 * build/tests/bin/trainer args... (NULL-terminated) under the preload into the trace
 * directory tdir (STEPPROF_MAX_MB=64), which must exit 0; its output in *r.
 */
void sp_t_run_trainer(struct sp_t_result *r, const char *tdir, char *const args[]);

/*
 * The same with more environment entries ("NAME=value", NULL-terminated, may be
 * NULL; "NAME=" unsets NAME), after the preload's: a setting of the preload
 * (STEPPROF_KERNEL_TIMING=auto) for this run only.
 */
void sp_t_run_trainer_env(struct sp_t_result *r, const char *tdir, char *const args[], char *const more_env[]);

/* The last line of text parsed as JSON (the trainer prints its ground truth last); NULL when it is not. */
struct sp_json *sp_t_parse_last_line(const char *text);

/* The ground truth in the trainer's stdout file path (asserted present and JSON). */
struct sp_json *sp_t_truth_file(const char *path);

/*
 * Start scenarios[k] as rank k (k < n; n == 1: no RANK variables at all), all at
 * the same time, `trainer --scenario S --iters ITERS` under the preload into
 * <dir>/<sub>; every trainer must succeed. truth[k] gets rank k's ground truth.
 * Returns the trace directory <dir>/<sub> (malloc'd).
 */
char *sp_t_run_ranks(const char *dir, const char *sub, int n, const char *const *scenarios, int iters,
		     struct sp_json **truth);

/*
 * sp_t_run_trainer_env(tr, tdir, args, more_env), its ground truth into *truth,
 * then `stepprof analyze --json tdir` (which must exit 0) into *ar and its JSON
 * into *an; both asserted parsed.
 */
void sp_t_trainer_analyze(struct sp_t_result *tr, struct sp_t_result *ar, const char *tdir, char *const args[],
			  char *const more_env[], struct sp_json **truth, struct sp_json **an);

/* Free what a trainer run and its analysis left: the ground truth, the analysis, both commands' results. */
void sp_t_trainer_run_free(struct sp_json *truth, struct sp_json *an, struct sp_t_result *tr, struct sp_t_result *ar);

/*
 * Every record of every trace file of dir (`stepprof dump --json`, which must
 * succeed), appended to *rec (*nrec of them; malloc'd, the caller frees each and
 * the array).
 */
void sp_t_dump_dir(const char *dir, struct sp_json ***rec, size_t *nrec);

#endif /* STEPPROF_TRAINERLIB_H */
