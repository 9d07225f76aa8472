/*
 * config.h - the STEPPROF_* variables of config.def that the preload reads,
 * parsed once at load (libtrace/envconfig.h: the parser and struct sp_config).
 * A bad value gives one `stepprof:` warning and the default.
 */
#ifndef STEPPROF_CONFIG_H
#define STEPPROF_CONFIG_H

#include "recorder.h"

#include "envconfig.h"

/* The process's configuration (filled by sp_config_load, defaults before). */
SP_HIDDEN extern struct sp_config sp_cfg;

/*
 * sp_cfg from the real environment; warnings through sp_warn_once (after QUIET
 * is known), keyed by the variable's lower-case name without STEPPROF_
 * ("kernel_timing"): a module that checks the variable again must warn under
 * that key, so that one bad value is one warning.
 */
SP_HIDDEN void sp_config_load(void);

/*
 * Start-up glue of the preload: hook_init.c's constructor loads the
 * configuration, chooses the directory and starts the recorder with these.
 */
/* Start recording into dir (created at the first record), files capped at max_bytes. */
SP_HIDDEN void sp_recorder_init(const char *dir, uint64_t max_bytes);
/* The trace directory sp_recorder_init was given. */
SP_HIDDEN const char *sp_recorder_dir(void);
/* The job's run id for this process's file header (hook_init.c chooses it); before the first record. */
SP_HIDDEN void sp_recorder_set_run_id(const char *id);
/* At the job's first process's exit (hook_init.c): "stepprof: trace in DIR ..." on stderr, once. */
SP_HIDDEN void sp_say_where(void);
/* stepprof_step()'s per-process index, restarted in a forked child (api.c). */
SP_HIDDEN void sp_api_fork_child(void);

#endif /* STEPPROF_CONFIG_H */
