/*
 * intern.h - interned strings of one trace file: a lock-free table from a
 * string's 64-bit hash to its id; the first time a string is seen its STRING
 * record goes to the file's keep area (never overwritten).
 *
 * Usable outside the preload (the eBPF collector links intern.c and
 * tracefile.c). The tables are anonymous mappings, probed linearly; an entry
 * is claimed with a CAS on its hash, so lookups and inserts never block. Two strings with the same 64-bit hash would share an id: with
 * a good hash and < 10^6 strings the odds are below 10^-7.
 */
#ifndef STEPPROF_INTERN_H
#define STEPPROF_INTERN_H

#include <stddef.h>
#include <stdint.h>

struct sp_tf;

struct sp_intern_ent {
	uint64_t hash; /* 0 = free */
	uint32_t id;   /* 0 = being written, SP_INTERN_FAILED = could not be stored */
	uint32_t reserved;
};

#define SP_INTERN_FAILED 0xffffffffu
#define SP_INTERN_MAX_ID 0xffffffu /* ids are 24-bit fields in records */

#define SP_INTERN_TABLES 5 /* 2^b, 2^(b+2), ... 2^(b+8) entries: 2^16 start -> 2^24 (the id limit) */

/*
 * Tables are added, never resized: when the newest is half full a table four
 * times larger is mapped beside it and new strings go there; a lookup probes
 * the newest first, then the older ones (where the process's first strings,
 * its kernel names and first paths, stay). A process with a few hundred
 * strings touches a few pages of a 1 MiB table; one that opens an ImageNet
 * (1.28 M paths) grows to 2^22 entries instead of storing every path again.
 */
struct sp_intern {
	struct sp_intern_ent *tab[SP_INTERN_TABLES]; /* tab[0 .. ntab-1] mapped */
	uint32_t mask[SP_INTERN_TABLES];	      /* entries - 1 */
	uint32_t ntab;				      /* tables in use (atomic) */
	uint32_t used;				      /* entries claimed in the newest table (atomic) */
	uint32_t growing;			      /* a thread is mapping the next table (atomic) */
	uint32_t next_id;			      /* last id handed out (atomic) */
	unsigned bits0;				      /* log2 of the first table's entries */
};

/* A first table of 2^bits entries (anonymous mapping, pages touched as used). 0 or -errno. */
int sp_intern_init(struct sp_intern *t, unsigned bits);
/* Forget everything (a forked child starts a new file): ids restart at 1. */
void sp_intern_reset(struct sp_intern *t);
void sp_intern_free(struct sp_intern *t);

/* The string's hash (never 0). */
uint64_t sp_intern_hash(const char *s, size_t len);

/*
 * The id of s[0..len) in tf (len clipped to SP_MAX_STRING), writing its STRING
 * record on first sight; 0 when it cannot be stored (keep area or disk full,
 * table full, ids exhausted). Lock-free; a known string costs one hash and a probe.
 */
uint32_t sp_intern_get(struct sp_intern *t, struct sp_tf *tf, const char *s, size_t len);

#endif /* STEPPROF_INTERN_H */
