/*
 * stepprof.h - the public C API of libstepprof.so.
 *
 * Link nothing: when the program runs without the preload these symbols are
 * absent, so call them through weak declarations or dlsym(RTLD_DEFAULT, ...).
 * From Python: ctypes.CDLL(None).stepprof_step() under LD_PRELOAD.
 *
 *   stepprof_step()       marks the start of the next training iteration
 *   stepprof_mark(name)   an instant, named marker on the calling thread
 *
 * Both are safe from any thread, lock-free and cost a few tens of nanoseconds.
 */
#ifndef STEPPROF_H
#define STEPPROF_H

#ifdef __cplusplus
extern "C" {
#endif

#define STEPPROF_VERSION "0.1.0"

void stepprof_step(void);
void stepprof_mark(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* STEPPROF_H */
