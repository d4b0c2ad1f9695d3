/*
 * store_int.h: what the files of store/ share among themselves; not for
 * callers of the store (they include store.h).
 */
#ifndef OFFLOADFS_STORE_INT_H
#define OFFLOADFS_STORE_INT_H

#include "store.h"
#include "epoch.h"

/* prev_bucket of a durable previous version that was empty (no pages). */
#define STORE_PREV_EMPTY (-2)

/* space.c: open DB-reserve (create: make it when missing) and take it if space allows. */
void store_reserve_open(struct ofs_store *s, int create);
/* The metadata's full hook: give the reserve back. */
int store_full_hook(void *arg);
/* Take the reserve again; 0 when it is held. */
int store_reserve_arm(struct ofs_store *s);

/* recover.c: after an unclean stop, under no lock (nothing else runs yet). */
int store_verify_unsynced(struct ofs_store *s);
int store_drop_missing(struct ofs_store *s);

/*
 * identity.c: 0 when ROOT and the database m (at meta_path; db_new: made
 * by this open) are one store's, with *pending set when the database has
 * no id yet (ofs_identity_record gives it ROOT's, or a new one for both);
 * -EEXIST with a message in err when they are two stores'.  Reads only.
 */
int ofs_identity_check(const char *root, struct meta *m, const char *meta_path, int db_new,
		       int *pending, char *err, size_t errlen);
int ofs_identity_record(const char *root, struct meta *m, char *err, size_t errlen);

#endif
