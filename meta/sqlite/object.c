/*
 * object.c: objects: each committed version's mapping (bucket, run of
 * pages, size, checksum, per-page checksums, value key), the previous
 * durable version recovery falls back to, the walks over mappings and
 * values, and the recovery queries after an unclean stop.
 */
#include "sqlite_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void sq_bind_update(sqlite3_stmt *s, const struct meta_inode *in)
{
	sqlite3_bind_int64(s, 1, (sqlite3_int64)in->ino);
	sqlite3_bind_int64(s, 2, in->mode);
	sqlite3_bind_int64(s, 3, in->uid);
	sqlite3_bind_int64(s, 4, in->gid);
	sqlite3_bind_int64(s, 5, in->atime);
	sqlite3_bind_int64(s, 6, in->mtime);
	sqlite3_bind_int64(s, 7, in->ctime);
	sqlite3_bind_int64(s, 8, (sqlite3_int64)in->size);
	sqlite3_bind_int(s, 9, in->bucket);
	sqlite3_bind_int64(s, 10, (sqlite3_int64)in->page);
	sqlite3_bind_int64(s, 11, (sqlite3_int64)in->npages);
	sqlite3_bind_int64(s, 12, (sqlite3_int64)in->csum);
	sqlite3_bind_int(s, 13, in->state);
	sqlite3_bind_int64(s, 14, (sqlite3_int64)in->gen);
	sqlite3_bind_int(s, 15, in->prev_bucket);
	sqlite3_bind_int64(s, 16, (sqlite3_int64)in->prev_page);
	sqlite3_bind_int64(s, 17, (sqlite3_int64)in->prev_npages);
	sqlite3_bind_int64(s, 18, (sqlite3_int64)in->prev_size);
	sqlite3_bind_int64(s, 19, (sqlite3_int64)in->prev_csum);
}

int sq_update(struct meta *mb, const struct meta_inode *in)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_UPDATE];

	if (meta_fault(&m->base))
		return -EIO;

	sq_bind_update(s, in);
	return sq_changed_one(m, sq_step_done(m, s));
}

int sq_commit_object(struct meta *mb, const struct meta_inode *in, const uint64_t *pcsums,
		       uint64_t n, const char *skey, enum meta_skey_op op)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_COMMIT_OBJECT];

	if (meta_fault(&m->base))
		return -EIO;

	sq_bind_update(s, in);
	if (n)
		sqlite3_bind_blob64(s, 20, pcsums, n * sizeof(uint64_t), SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 20);
	if (skey)
		sqlite3_bind_blob64(s, 21, skey, strlen(skey), SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 21);
	sqlite3_bind_int(s, 22, (int)op);
	return sq_changed_one(m, sq_step_done(m, s));
}

int sq_insert_object(struct meta *mb, struct meta_inode *in, const char *name, size_t len,
		       const uint64_t *pcsums, uint64_t n)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_INSERT_OBJECT];
	int ret;

	if (meta_fault(&m->base))
		return -EIO;
	if (len == 0 || len > META_NAME_MAX)
		return len ? -ENAMETOOLONG : -EINVAL;
	if (!S_ISREG(in->mode))
		return -EINVAL;
	sq_bind_new_inode(s, in, name, len);
	sqlite3_bind_int64(s, 15, (sqlite3_int64)in->gen);
	if (n)
		sqlite3_bind_blob64(s, 16, pcsums, n * sizeof(uint64_t), SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 16);
	ret = sq_step_done(m, s);
	if (!ret)
		in->ino = (uint64_t)sqlite3_last_insert_rowid(m->db);
	return ret;
}

/* Column c of s as a NUL-terminated key in buf, or NULL; -EUCLEAN when it cannot be one. */
static int sq_col_key(sqlite3_stmt *s, int c, char *buf, const char **out)
{
	int len = sqlite3_column_bytes(s, c);

	*out = NULL;
	if (sqlite3_column_type(s, c) == SQLITE_NULL)
		return 0;
	if (len <= 0 || len > META_SKEY_MAX || memchr(sqlite3_column_blob(s, c), 0, (size_t)len))
		return -EUCLEAN;
	memcpy(buf, sqlite3_column_blob(s, c), (size_t)len);
	buf[len] = '\0';
	*out = buf;
	return 0;
}

int sq_foreach_value(struct meta *mb, meta_value_fn fn, void *ctx)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_VALUES];
	static __thread char key[META_SKEY_MAX + 1], prev[META_SKEY_MAX + 1];
	const char *k, *p;
	struct meta_inode in;
	int rc, ret = 0;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		sq_row_mapping(s, &in);
		ret = sq_col_key(s, INODE_NCOLS + 1, key, &k);
		if (!ret)
			ret = sq_col_key(s, INODE_NCOLS + 2, prev, &p);
		if (!ret)
			ret = fn(ctx, &in, k, p);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_ROW && rc != SQLITE_DONE)
		ret = sq_errno(rc);
	sq_finish(s);
	return ret;
}

int sq_pcsums_read(sqlite3_stmt *s, uint64_t *pcsums, uint64_t n)
{
	int rc, ret = -ENOENT;

	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_BLOB) {
		if ((uint64_t)sqlite3_column_bytes(s, 0) == n * sizeof(uint64_t)) {
			memcpy(pcsums, sqlite3_column_blob(s, 0), n * sizeof(uint64_t));
			ret = 0;
		} else {
			ret = -EUCLEAN;
		}
	} else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		ret = sq_errno(rc);
	}
	sq_finish(s);
	return ret;
}

int sq_pcsums_get(struct meta *mb, uint64_t ino, uint64_t *pcsums, uint64_t n)
{
	sqlite3_stmt *s = sq(mb)->st[ST_PCSUMS_GET];

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	return sq_pcsums_read(s, pcsums, n);
}

int sq_foreach_unsynced(struct meta *mb, uint64_t gen, meta_ino_fn fn, void *ctx)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_UNSYNCED];

	sqlite3_bind_int64(s, 1, (sqlite3_int64)gen);
	return sq_each_mapping(s, fn, ctx);
}

int sq_prev_clear(struct meta *mb)
{
	struct meta_sq *m = sq(mb);
	int ret = sq_exec(m, "UPDATE inodes SET prev_bucket = -1, prev_npages = 0, "
			       "prev_skey = NULL WHERE prev_bucket <> -1 OR prev_skey IS NOT NULL");

	return ret ? ret
		   : sq_exec(m, "UPDATE extents SET prev_bucket = -1, prev_npages = 0, "
				  "prev_skey = NULL WHERE prev_bucket <> -1 OR prev_skey IS NOT NULL");
}

int sq_foreach_mapping(struct meta *mb, meta_ino_fn fn, void *ctx)
{
	struct meta_sq *m = sq(mb);

	return sq_each_mapping(m->st[ST_MAPPINGS], fn, ctx);
}

int sq_count_unsettled(struct meta *mb, uint64_t *new_files, uint64_t *orphans)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = NULL;
	int rc;

	*new_files = *orphans = 0;
	rc = sqlite3_prepare_v2(m->db,
				"SELECT count(*) FILTER (WHERE parent IS NOT NULL AND state = 1), "
				"count(*) FILTER (WHERE parent IS NULL) FROM inodes "
				"WHERE state = 1 OR parent IS NULL",
				-1, &s, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		*new_files = (uint64_t)sqlite3_column_int64(s, 0);
		*orphans = (uint64_t)sqlite3_column_int64(s, 1);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return sq_errno(rc);
}

int sq_recover(struct meta *mb, uint64_t *dropped_new, uint64_t *dropped_orphans)
{
	struct meta_sq *m = sq(mb);
	int ret;

	*dropped_new = *dropped_orphans = 0;
	ret = sq_begin(&m->base);
	if (ret)
		return ret;
	ret = sq_exec(m, "DELETE FROM inodes WHERE parent IS NULL");
	if (!ret) {
		*dropped_orphans = (uint64_t)sqlite3_changes(m->db);
		ret = sq_exec(m, "DELETE FROM inodes WHERE state = 1");
	}
	if (!ret) {
		*dropped_new = (uint64_t)sqlite3_changes(m->db);
		return sq_commit(&m->base);
	}
	sq_rollback(&m->base);
	return ret;
}

int sq_integrity(struct meta *mb, char *first, size_t firstlen)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = NULL;
	int rc, n = 0;

	if (firstlen)
		first[0] = '\0';
	rc = sqlite3_prepare_v2(m->db, "PRAGMA integrity_check(100)", -1, &s, NULL);
	if (rc != SQLITE_OK) {
		if (firstlen)
			snprintf(first, firstlen, "%s", sqlite3_errmsg(m->db));
		return sq_errno(rc);
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *row = (const char *)sqlite3_column_text(s, 0);

		if (row && !strcmp(row, "ok"))
			continue;
		if (!n++ && firstlen) {
			static const char hdr[] = "*** in database main ***\n";
			char *p;

			/* One line for a message: sqlite's heading dropped, its lines joined. */
			if (row && !strncmp(row, hdr, sizeof(hdr) - 1))
				row += sizeof(hdr) - 1;
			snprintf(first, firstlen, "%s", row ? row : "?");
			for (p = first; (p = strchr(p, '\n'));)
				*p = ' ';
		}
	}
	if (rc != SQLITE_DONE && !n) {
		if (firstlen)
			snprintf(first, firstlen, "%s", sqlite3_errmsg(m->db));
		n = sq_errno(rc);
	}
	sqlite3_finalize(s);
	return n;
}

static int sq_count(sqlite3_stmt *s, uint64_t *n)
{
	int rc = sqlite3_step(s);

	if (rc == SQLITE_ROW)
		*n = (uint64_t)sqlite3_column_int64(s, 0);
	sq_finish(s);
	return rc == SQLITE_ROW ? 0 : sq_errno(rc);
}

int sq_count_files(struct meta *mb, uint64_t *n)
{
	struct meta_sq *m = sq(mb);

	return sq_count(m->st[ST_COUNT_FILES], n);
}

int sq_count_mappings(struct meta *mb, uint64_t *n)
{
	struct meta_sq *m = sq(mb);

	return sq_count(m->st[ST_COUNT_MAPPINGS], n);
}
