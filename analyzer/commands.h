/*
 * commands.h - the entry points of the `stepprof` verbs (commands.def).
 *
 * int command_<verb>(int argc, char **argv): argv[0] is the verb, options follow;
 * each verb handles --help/-h itself (usage on stdout, exit 0) and returns its
 * exit code (util.h). main.c declares these weak, so the binary links and runs
 * while a verb's file is not written yet ("stepprof: <verb>: not built").
 */
#ifndef STEPPROF_COMMANDS_H
#define STEPPROF_COMMANDS_H

#define SP_COMMAND(verb, operands, summary) int command_##verb(int argc, char **argv);
#include "commands.def"
#undef SP_COMMAND

#endif /* STEPPROF_COMMANDS_H */
