/*
 * Helpers shared by the unit tests of a whole store (test_store.c over the
 * pages backend, test_ubsio.c over the ubsio stand-in).  A failure inside
 * one fails the calling test through check's assertions.
 */
#ifndef OFS_TEST_HELPERS_H
#define OFS_TEST_HELPERS_H

#include <pthread.h>
#include <stddef.h>

#include "meta.h"
#include "store.h"

/* len bytes of a pattern that differs with seed and along the buffer. */
void fill(char *buf, size_t len, unsigned seed);

/* A new, never committed record for name under the root. */
struct meta_inode new_record(struct ofs_store *s, const char *name);

/*
 * ofs_store_sync(s, lock) with commit(arg) run once inside the barrier, at
 * the first of its steps (begin, data sync) where lock is free, as another
 * thread's commit could land there.  The sync's result; commit must have run.
 */
int sync_with_commit_inside(struct ofs_store *s, pthread_mutex_t *lock, void (*commit)(void *),
			    void *arg);

/* A commit's arg for sync_with_commit_inside: the store and the object's record. */
struct store_obj {
	struct ofs_store *s;
	struct meta_inode *m;
};

#endif
