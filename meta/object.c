/*
 * object.c: objects: each committed version's mapping (bucket, run of
 * pages, size, checksum, per-page checksums, value key), the previous
 * durable version recovery falls back to, the walks over mappings and
 * values, and the recovery queries after an unclean stop.
 */
#include "meta_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void meta_bind_update(sqlite3_stmt *s, const struct meta_inode *in)
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

int meta_update(struct meta *m, const struct meta_inode *in)
{
	sqlite3_stmt *s = m->st[ST_UPDATE];

	if (meta_fault(m))
		return -EIO;

	meta_bind_update(s, in);
	return meta_changed_one(m, meta_step_done(m, s));
}

int meta_commit_object(struct meta *m, const struct meta_inode *in, const uint64_t *pcsums,
		       uint64_t n, const char *skey, enum meta_skey_op op)
{
	sqlite3_stmt *s = m->st[ST_COMMIT_OBJECT];

	if (meta_fault(m))
		return -EIO;

	meta_bind_update(s, in);
	if (n)
		sqlite3_bind_blob64(s, 20, pcsums, n * sizeof(uint64_t), SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 20);
	if (skey)
		sqlite3_bind_blob64(s, 21, skey, strlen(skey), SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 21);
	sqlite3_bind_int(s, 22, (int)op);
	return meta_changed_one(m, meta_step_done(m, s));
}

int meta_insert_object(struct meta *m, struct meta_inode *in, const char *name, size_t len,
		       const uint64_t *pcsums, uint64_t n)
{
	sqlite3_stmt *s = m->st[ST_INSERT_OBJECT];
	int ret;

	if (meta_fault(m))
		return -EIO;
	if (len == 0 || len > META_NAME_MAX)
		return len ? -ENAMETOOLONG : -EINVAL;
	if (!S_ISREG(in->mode))
		return -EINVAL;
	meta_bind_new_inode(s, in, name, len);
	sqlite3_bind_int64(s, 15, (sqlite3_int64)in->gen);
	if (n)
		sqlite3_bind_blob64(s, 16, pcsums, n * sizeof(uint64_t), SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 16);
	ret = meta_step_done(m, s);
	if (!ret)
		in->ino = (uint64_t)sqlite3_last_insert_rowid(m->db);
	return ret;
}

/* Column c of s as a NUL-terminated key in buf, or NULL; -EUCLEAN when it cannot be one. */
static int meta_col_key(sqlite3_stmt *s, int c, char *buf, const char **out)
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

int meta_foreach_value(struct meta *m, meta_value_fn fn, void *ctx)
{
	sqlite3_stmt *s = m->st[ST_VALUES];
	static __thread char key[META_SKEY_MAX + 1], prev[META_SKEY_MAX + 1];
	const char *k, *p;
	struct meta_inode in;
	int rc, ret = 0;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		meta_row_mapping(s, &in);
		ret = meta_col_key(s, INODE_NCOLS + 1, key, &k);
		if (!ret)
			ret = meta_col_key(s, INODE_NCOLS + 2, prev, &p);
		if (!ret)
			ret = fn(ctx, &in, k, p);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_ROW && rc != SQLITE_DONE)
		ret = meta_errno(rc);
	meta_finish(s);
	return ret;
}

int meta_pcsums_get(struct meta *m, uint64_t ino, uint64_t *pcsums, uint64_t n)
{
	sqlite3_stmt *s = m->st[ST_PCSUMS_GET];
	int rc, ret = -ENOENT;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_BLOB) {
		if ((uint64_t)sqlite3_column_bytes(s, 0) == n * sizeof(uint64_t)) {
			memcpy(pcsums, sqlite3_column_blob(s, 0), n * sizeof(uint64_t));
			ret = 0;
		} else {
			ret = -EUCLEAN;
		}
	} else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		ret = meta_errno(rc);
	}
	meta_finish(s);
	return ret;
}

int meta_foreach_unsynced(struct meta *m, uint64_t gen, meta_ino_fn fn, void *ctx)
{
	sqlite3_stmt *s = m->st[ST_UNSYNCED];

	sqlite3_bind_int64(s, 1, (sqlite3_int64)gen);
	return meta_each_mapping(s, fn, ctx);
}

int meta_prev_clear(struct meta *m)
{
	int ret = meta_exec(m, "UPDATE inodes SET prev_bucket = -1, prev_npages = 0, "
			       "prev_skey = NULL WHERE prev_bucket <> -1 OR prev_skey IS NOT NULL");

	return ret ? ret
		   : meta_exec(m, "UPDATE extents SET prev_bucket = -1, prev_npages = 0, "
				  "prev_skey = NULL WHERE prev_bucket <> -1 OR prev_skey IS NOT NULL");
}

int meta_foreach_mapping(struct meta *m, meta_ino_fn fn, void *ctx)
{
	return meta_each_mapping(m->st[ST_MAPPINGS], fn, ctx);
}

int meta_count_unsettled(struct meta *m, uint64_t *new_files, uint64_t *orphans)
{
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
	return meta_errno(rc);
}

int meta_recover(struct meta *m, uint64_t *dropped_new, uint64_t *dropped_orphans)
{
	int ret;

	*dropped_new = *dropped_orphans = 0;
	ret = meta_begin(m);
	if (ret)
		return ret;
	ret = meta_exec(m, "DELETE FROM inodes WHERE parent IS NULL");
	if (!ret) {
		*dropped_orphans = (uint64_t)sqlite3_changes(m->db);
		ret = meta_exec(m, "DELETE FROM inodes WHERE state = 1");
	}
	if (!ret) {
		*dropped_new = (uint64_t)sqlite3_changes(m->db);
		return meta_commit(m);
	}
	meta_rollback(m);
	return ret;
}

int meta_integrity(struct meta *m, char *first, size_t firstlen)
{
	sqlite3_stmt *s = NULL;
	int rc, n = 0;

	if (firstlen)
		first[0] = '\0';
	rc = sqlite3_prepare_v2(m->db, "PRAGMA integrity_check(100)", -1, &s, NULL);
	if (rc != SQLITE_OK) {
		if (firstlen)
			snprintf(first, firstlen, "%s", sqlite3_errmsg(m->db));
		return meta_errno(rc);
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
		n = meta_errno(rc);
	}
	sqlite3_finalize(s);
	return n;
}

static int meta_count(sqlite3_stmt *s, uint64_t *n)
{
	int rc = sqlite3_step(s);

	if (rc == SQLITE_ROW)
		*n = (uint64_t)sqlite3_column_int64(s, 0);
	meta_finish(s);
	return rc == SQLITE_ROW ? 0 : meta_errno(rc);
}

int meta_count_files(struct meta *m, uint64_t *n)
{
	return meta_count(m->st[ST_COUNT_FILES], n);
}

int meta_count_mappings(struct meta *m, uint64_t *n)
{
	return meta_count(m->st[ST_COUNT_MAPPINGS], n);
}
