/*
 * ns.c: the namespace: one row per file or directory, found by (parent,
 * name); names, paths and keys built from it; directory times.  Link
 * counts of directories are kept by triggers of the schema (open.c).
 */
#include "sqlite_int.h"

#include <errno.h>
#include <string.h>

int sq_get(struct meta *mb, uint64_t ino, struct meta_inode *out)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_GET];

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	return sq_one_inode(s, out);
}

int sq_lookup(struct meta *mb, uint64_t parent, const char *name, size_t len,
		struct meta_inode *out)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_LOOKUP];

	if (len > META_NAME_MAX)
		return -ENAMETOOLONG;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)parent);
	sqlite3_bind_blob(s, 2, name, (int)len, SQLITE_STATIC);
	return sq_one_inode(s, out);
}

int sq_lookup_brief(struct meta *mb, uint64_t parent, const char *name, size_t len,
		      struct meta_inode *out)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_LOOKUP_BRIEF];
	int rc, ret = 0;

	if (len > META_NAME_MAX)
		return -ENAMETOOLONG;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)parent);
	sqlite3_bind_blob(s, 2, name, (int)len, SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		memset(out, 0, sizeof(*out));
		out->ino = (uint64_t)sqlite3_column_int64(s, 0);
		out->mode = (uint32_t)sqlite3_column_int64(s, 1);
		out->state = sqlite3_column_int(s, 2);
		out->size = (uint64_t)sqlite3_column_int64(s, 3);
		out->bucket = sqlite3_column_int(s, 4);
		out->page = (uint64_t)sqlite3_column_int64(s, 5);
		out->npages = (uint64_t)sqlite3_column_int64(s, 6);
		out->csum = (uint64_t)sqlite3_column_int64(s, 7);
		out->prev_bucket = -1;
	} else {
		ret = rc == SQLITE_DONE ? -ENOENT : sq_errno(rc);
	}
	/* Reset only: every call binds both parameters (a batch runs one per key). */
	sqlite3_reset(s);
	return ret;
}

int sq_name(struct meta *mb, uint64_t ino, uint64_t *parent, char *name, size_t *len)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_NAME];
	int rc, ret = 0;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL) {
		int n = sqlite3_column_bytes(s, 1);
		const void *p = sqlite3_column_blob(s, 1);

		*parent = (uint64_t)sqlite3_column_int64(s, 0);
		if (n > META_NAME_MAX) {
			ret = -EUCLEAN;
		} else {
			if (n)
				memcpy(name, p, (size_t)n);
			*len = (size_t)n;
		}
	} else {
		ret = rc == SQLITE_ROW || rc == SQLITE_DONE ? -ENOENT : sq_errno(rc);
	}
	sq_finish(s);
	return ret;
}

int sq_key_len(struct meta *mb, uint64_t ino, size_t *len)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_NAME];
	size_t total = 0;
	int rc, depth = 0;

	/* Only the lengths, from ino up to its tenant (not counted): nothing copied. */
	while (ino != META_ROOT_INO) {
		uint64_t parent;
		size_t n;

		if (depth++ > META_KEY_MAX)
			return -ELOOP;
		sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
		rc = sqlite3_step(s);
		if (rc != SQLITE_ROW || sqlite3_column_type(s, 0) == SQLITE_NULL) {
			sq_finish(s);
			return rc == SQLITE_ROW || rc == SQLITE_DONE ? -ENOENT : sq_errno(rc);
		}
		parent = (uint64_t)sqlite3_column_int64(s, 0);
		n = (size_t)sqlite3_column_bytes(s, 1);
		sq_finish(s);
		if (parent == META_ROOT_INO)
			break;
		total += (total ? 1 : 0) + n;
		if (total > META_KEY_MAX)
			return -ENAMETOOLONG;
		ino = parent;
	}
	*len = total;
	return 0;
}

int sq_subtree_depth(struct meta *mb, uint64_t dir, size_t *len)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = NULL;
	int rc;

	*len = 0;
	/* Walks the whole subtree: only a rename of a directory to a longer key asks. */
	rc = sqlite3_prepare_v2(m->db,
				"WITH RECURSIVE sub(ino, len) AS ("
				" SELECT ino, length(name) FROM inodes WHERE parent = ?1"
				" UNION ALL SELECT i.ino, sub.len + 1 + length(i.name)"
				" FROM inodes i JOIN sub ON i.parent = sub.ino)"
				" SELECT coalesce(max(len), 0) FROM sub",
				-1, &s, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(s, 1, (sqlite3_int64)dir);
		rc = sqlite3_step(s);
		if (rc == SQLITE_ROW) {
			*len = (size_t)sqlite3_column_int64(s, 0);
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(s);
	return sq_errno(rc);
}

int sq_dir_changed(struct meta *mb, uint64_t dir, int64_t now, uint32_t *nlink)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_DIR_CHANGED];
	int rc, ret;

	if (meta_fault(&m->base))
		return -EIO;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)dir);
	sqlite3_bind_int64(s, 2, now);
	ret = sq_changed_one(m, sq_errno(sqlite3_step(s)));
	sq_finish(s);
	if (ret || !nlink)
		return ret;
	s = m->st[ST_NLINK];
	sqlite3_bind_int64(s, 1, (sqlite3_int64)dir);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*nlink = (uint32_t)sqlite3_column_int64(s, 0);
	else
		ret = rc == SQLITE_DONE ? -ENOENT : sq_errno(rc);
	sq_finish(s);
	return ret;
}

int sq_insert(struct meta *mb, struct meta_inode *in, const char *name, size_t len)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_INSERT];
	int ret;

	if (meta_fault(&m->base))
		return -EIO;

	if (len == 0 || len > META_NAME_MAX)
		return len ? -ENAMETOOLONG : -EINVAL;
	sq_bind_new_inode(s, in, name, len);
	ret = sq_step_done(m, s);
	if (!ret)
		in->ino = (uint64_t)sqlite3_last_insert_rowid(m->db);
	return ret;
}

int sq_delete(struct meta *mb, uint64_t ino)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_DELETE];

	if (meta_fault(&m->base))
		return -EIO;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	return sq_changed_one(m, sq_step_done(m, s));
}

int sq_detach(struct meta *mb, uint64_t ino)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_DETACH];

	if (meta_fault(&m->base))
		return -EIO;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	return sq_changed_one(m, sq_step_done(m, s));
}

int sq_move(struct meta *mb, uint64_t ino, uint64_t newparent, const char *name, size_t len)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_MOVE];

	if (meta_fault(&m->base))
		return -EIO;

	if (len == 0 || len > META_NAME_MAX)
		return len ? -ENAMETOOLONG : -EINVAL;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)newparent);
	sqlite3_bind_blob(s, 3, name, (int)len, SQLITE_STATIC);
	return sq_changed_one(m, sq_step_done(m, s));
}

int sq_has_children(struct meta *mb, uint64_t dir)
{
	struct meta_sq *m = sq(mb);

	return sq_exists(m, ST_HAS_CHILDREN, dir);
}

int sq_readdir(struct meta *mb, uint64_t dir, uint64_t after, meta_dirent_fn fn, void *ctx)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_READDIR];
	struct meta_inode in;
	int rc, ret = 0;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)dir);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)after);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		sq_row_inode(s, &in);
		ret = fn(ctx, &in, sqlite3_column_blob(s, INODE_NCOLS),
			 (size_t)sqlite3_column_bytes(s, INODE_NCOLS));
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = sq_errno(rc);
	sq_finish(s);
	return ret;
}

