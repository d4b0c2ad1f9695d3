/*
 * snapshot.c: what a clean unmount leaves: the clean flag, and a snapshot
 * of each bucket's allocation bitmap, so that the next mount need not
 * rebuild the bitmaps from every mapping.
 */
#include "sqlite_int.h"

#include <errno.h>
#include <string.h>

int sq_clean_get(struct meta *mb, int *clean)
{
	struct meta_sq *m = sq(mb);
	sqlite3_int64 v = 0;
	int ret = sq_kv_get(m, "clean", &v, NULL, 0);

	*clean = ret == 0 && v == 1;
	return ret == -ENOENT ? 0 : ret;
}

int sq_clean_set(struct meta *mb, int clean)
{
	struct meta_sq *m = sq(mb);

	return sq_kv_set_int(m, "clean", clean ? 1 : 0);
}

int sq_bitmap_save(struct meta *mb, uint32_t bucket, uint64_t npages,
		     const uint64_t *words, uint64_t nwords)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_BITMAP_SAVE];

	sqlite3_bind_int64(s, 1, bucket);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)npages);
	sqlite3_bind_blob64(s, 3, words, nwords * sizeof(uint64_t), SQLITE_STATIC);
	return sq_step_done(m, s);
}

int sq_bitmap_load(struct meta *mb, uint32_t bucket, uint64_t npages,
		     uint64_t *words, uint64_t nwords)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_BITMAP_LOAD];
	int rc, ret;

	sqlite3_bind_int64(s, 1, bucket);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		if ((uint64_t)sqlite3_column_int64(s, 0) != npages ||
		    (uint64_t)sqlite3_column_bytes(s, 1) != nwords * sizeof(uint64_t)) {
			ret = -EINVAL;
		} else {
			memcpy(words, sqlite3_column_blob(s, 1), nwords * sizeof(uint64_t));
			ret = 0;
		}
	} else {
		ret = rc == SQLITE_DONE ? -ENOENT : sq_errno(rc);
	}
	sq_finish(s);
	return ret;
}

int sq_bitmap_clear(struct meta *mb)
{
	struct meta_sq *m = sq(mb);

	return sq_step_done(m, m->st[ST_BITMAP_CLEAR]);
}
