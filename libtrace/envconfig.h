/*
 * envconfig.h - the one parser of the STEPPROF_* variables (preload/config.def),
 * shared by libstepprof.so, `stepprof run` and the eBPF collector.
 *
 * struct sp_config holds each variable's value, valid or its default: STR and
 * ENUM as strings (an ENUM is one of its words, or a number where the word N
 * is allowed), INT as long long within its bounds, BOOL as 0/1. A bad value
 * is reported to the caller's warn function and the default is kept.
 */
#ifndef STEPPROF_ENVCONFIG_H
#define STEPPROF_ENVCONFIG_H

/* Who reads a variable (config.def's readers column). */
#define SP_CFG_PRELOAD 0x1u
#define SP_CFG_RUN     0x2u
#define SP_CFG_BPF     0x4u

typedef const char *sp_cfg_STR;
typedef const char *sp_cfg_ENUM;
typedef long long sp_cfg_INT;
typedef int sp_cfg_BOOL;

struct sp_config {
#define SP_CONFIG(name, type, dflt, lo, hi, words, readers, help) sp_cfg_##type name;
#include "../preload/config.def" /* the list lives with the preload, its main reader */
#undef SP_CONFIG
};

/* Called once per bad value: the variable (with STEPPROF_), the value, what was expected. */
typedef void (*sp_config_warn_fn)(const char *var, const char *value, const char *expected);

/*
 * Parse into c the variables read by `readers` (SP_CFG_* bits) with get(name)
 * as the environment (name includes STEPPROF_); the others get their default.
 * Returns the number of bad values (each reported to warn, may be NULL).
 * STR and ENUM values point into what get returned (or are static defaults):
 * nothing is allocated; a caller that keeps them past a change of that
 * environment copies them (the preload does).
 */
int sp_config_parse(struct sp_config *c, unsigned readers, const char *(*get)(const char *name),
		    sp_config_warn_fn warn);

#endif /* STEPPROF_ENVCONFIG_H */
