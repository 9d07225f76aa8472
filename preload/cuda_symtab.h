/*
 * cuda_symtab.h - the name of a function from its module's .symtab, for the
 * frames dladdr cannot name (a static cudart inside a program that is not
 * -rdynamic exports none of its functions).
 */
#ifndef STEPPROF_CUDA_SYMTAB_H
#define STEPPROF_CUDA_SYMTAB_H

#include <stddef.h>

#include "recorder.h"

/*
 * The function of the module's .symtab that holds pc: its name in buf
 * (truncated to len - 1 bytes) and 0, or -1. Maps the module's file for the
 * look-up only: the descriptor is closed before the symbols are read.
 */
SP_HIDDEN int sp_symtab_name(const void *pc, char *buf, size_t len);

#endif
