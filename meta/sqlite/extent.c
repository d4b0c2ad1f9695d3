/*
 * extent.c: the extents of files larger than one extent: each one's
 * committed version (mapping, checksums, value key) and the last durable
 * one, as an inode row keeps them for a file of one run.
 */
#include "sqlite_int.h"

#include <errno.h>
#include <string.h>

int sq_extent_commit(struct meta *mb, const struct meta_inode *e, const uint64_t *pcsums,
		       uint64_t n, const char *skey, enum meta_skey_op op)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_EXTENT_COMMIT];

	if (meta_fault(&m->base))
		return -EIO;
	if (e->ext == 0)
		return -EINVAL;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)e->ino);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)(e->ext - 1));
	sqlite3_bind_int64(s, 3, (sqlite3_int64)e->size);
	sqlite3_bind_int(s, 4, e->bucket);
	sqlite3_bind_int64(s, 5, (sqlite3_int64)e->page);
	sqlite3_bind_int64(s, 6, (sqlite3_int64)e->npages);
	sqlite3_bind_int64(s, 7, (sqlite3_int64)e->csum);
	sqlite3_bind_int64(s, 8, (sqlite3_int64)e->gen);
	sqlite3_bind_int(s, 9, e->prev_bucket);
	sqlite3_bind_int64(s, 10, (sqlite3_int64)e->prev_page);
	sqlite3_bind_int64(s, 11, (sqlite3_int64)e->prev_npages);
	sqlite3_bind_int64(s, 12, (sqlite3_int64)e->prev_size);
	sqlite3_bind_int64(s, 13, (sqlite3_int64)e->prev_csum);
	if (n)
		sqlite3_bind_blob64(s, 14, pcsums, n * sizeof(uint64_t), SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 14);
	if (skey)
		sqlite3_bind_blob64(s, 15, skey, strlen(skey), SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 15);
	sqlite3_bind_int(s, 16, (int)op);
	return sq_step_done(m, s);
}

int sq_extent_delete(struct meta *mb, uint64_t ino, uint64_t idx)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_EXTENT_DELETE];

	if (meta_fault(&m->base))
		return -EIO;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)idx);
	return sq_changed_one(m, sq_step_done(m, s));
}

int sq_extents(struct meta *mb, uint64_t ino, meta_ino_fn fn, void *ctx)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_EXTENTS];

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	return sq_each_mapping(s, fn, ctx);
}

int sq_extent_pcsums_get(struct meta *mb, uint64_t ino, uint64_t idx, uint64_t *pcsums,
			   uint64_t n)
{
	sqlite3_stmt *s = sq(mb)->st[ST_EXTENT_PCSUMS];

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)idx);
	return sq_pcsums_read(s, pcsums, n);
}

/* Run sql with ?1 = ino: a rare statement, prepared each time. */
static int sq_run_ino(struct meta_sq *m, const char *sql, uint64_t ino)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(m->db, sql, -1, &s, NULL);

	if (rc != SQLITE_OK)
		return sq_errno(rc);
	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	rc = sq_step_done(m, s);
	sqlite3_finalize(s);
	return rc;
}

int sq_extent_from_row(struct meta *mb, uint64_t ino)
{
	struct meta_sq *m = sq(mb);
	int ret;

	if (meta_fault(&m->base))
		return -EIO;
	ret = sq_run_ino(m,
			   "INSERT INTO extents (ino, idx, size, bucket, page, npages, csum, gen, "
			   "prev_bucket, prev_page, prev_npages, prev_size, prev_csum, pcsums, skey, "
			   "prev_skey) SELECT ino, 0, size, bucket, page, npages, csum, gen, "
			   "prev_bucket, prev_page, prev_npages, prev_size, prev_csum, pcsums, skey, "
			   "prev_skey FROM inodes WHERE ino = ?1 AND bucket >= 0",
			   ino);
	return ret ? ret
		   : sq_run_ino(m,
				  "UPDATE inodes SET pcsums = NULL, skey = NULL, prev_skey = NULL, "
				  "prev_bucket = -1 WHERE ino = ?1",
				  ino);
}

int sq_extent_to_row(struct meta *mb, uint64_t ino)
{
	struct meta_sq *m = sq(mb);
	int ret;

	if (meta_fault(&m->base))
		return -EIO;
	ret = sq_run_ino(m,
			   "UPDATE inodes SET (size, bucket, page, npages, csum, gen, prev_bucket, "
			   "prev_page, prev_npages, prev_size, prev_csum, pcsums, skey, prev_skey) = "
			   "(SELECT size, bucket, page, npages, csum, gen, prev_bucket, prev_page, "
			   "prev_npages, prev_size, prev_csum, pcsums, skey, prev_skey FROM extents "
			   "WHERE ino = ?1 AND idx = 0) WHERE ino = ?1 AND EXISTS "
			   "(SELECT 1 FROM extents WHERE ino = ?1 AND idx = 0)",
			   ino);
	return ret ? ret : sq_run_ino(m, "DELETE FROM extents WHERE ino = ?1", ino);
}

int sq_extents_stray(struct meta *mb, int drop, uint64_t *n)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = NULL;
	int rc;

	*n = 0;
	rc = sqlite3_prepare_v2(m->db, drop ? "DELETE FROM extents WHERE ino NOT IN (SELECT ino FROM inodes)"
					    : "SELECT count(*) FROM extents WHERE ino NOT IN "
					      "(SELECT ino FROM inodes)",
				-1, &s, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*n = (uint64_t)sqlite3_column_int64(s, 0);
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		*n = (uint64_t)sqlite3_changes(m->db);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return sq_errno(rc);
}
