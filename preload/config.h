/*
 * config.h - the STEPPROF_* variables of config.def, parsed once at load.
 *
 * sp_cfg.<NAME> holds each variable's value, valid or its default: STR and
 * ENUM as strings (an ENUM is one of the words of its help text, or a number
 * where the word N is allowed), INT as long long within the bounds of its help
 * text, BOOL as 0/1. A bad value gives one `stepprof:` warning and the default.
 */
#ifndef STEPPROF_CONFIG_H
#define STEPPROF_CONFIG_H

#include "recorder.h"

typedef const char *sp_cfg_STR;
typedef const char *sp_cfg_ENUM;
typedef long long sp_cfg_INT;
typedef int sp_cfg_BOOL;

struct sp_config {
#define SP_CONFIG(name, type, dflt, help) sp_cfg_##type name;
#include "config.def"
#undef SP_CONFIG
};

/* The process's configuration (filled by sp_config_load, defaults before). */
SP_HIDDEN extern struct sp_config sp_cfg;

/* Called once per bad value: the variable (with STEPPROF_), the value, what was expected. */
typedef void (*sp_config_warn_fn)(const char *var, const char *value, const char *expected);

/* Parse into c with get(name) as the environment (name includes STEPPROF_).
 * Returns the number of bad values (each reported to warn, may be NULL). */
SP_HIDDEN int sp_config_parse(struct sp_config *c, const char *(*get)(const char *name), sp_config_warn_fn warn);

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
/* stepprof_step()'s per-process index, restarted in a forked child (api.c). */
SP_HIDDEN void sp_api_fork_child(void);

#endif /* STEPPROF_CONFIG_H */
