/*
 * xattr.c: user extended attributes, one row per (inode, name); the
 * schema's trigger deletes an inode's with it.
 */
#include "sqlite_int.h"

#include <errno.h>
#include <string.h>

ssize_t sq_xattr_get(struct meta *mb, uint64_t ino, const char *name, void *buf, size_t cap)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_XATTR_GET];
	ssize_t ret;
	int rc;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	sqlite3_bind_blob(s, 2, name, (int)strlen(name), SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		size_t n = (size_t)sqlite3_column_bytes(s, 0);

		ret = (ssize_t)n;
		if (cap && n > cap)
			ret = -ERANGE;
		else if (cap && n)
			memcpy(buf, sqlite3_column_blob(s, 0), n);
	} else {
		ret = rc == SQLITE_DONE ? -ENODATA : sq_errno(rc);
	}
	sq_finish(s);
	return ret;
}

int sq_xattr_set(struct meta *mb, uint64_t ino, const char *name, const void *value,
		   size_t len, int flags)
{
	struct meta_sq *m = sq(mb);
	size_t nlen = strlen(name);
	sqlite3_stmt *s;
	ssize_t have;
	int rc, ret;

	if (nlen == 0 || nlen > META_XATTR_NAME_MAX)
		return nlen ? -ERANGE : -EINVAL;
	if (len > META_XATTR_SIZE_MAX)
		return -E2BIG;
	have = sq_xattr_get(&m->base, ino, name, NULL, 0);
	if (have < 0 && have != -ENODATA)
		return (int)have;
	if (have >= 0 && (flags & META_XATTR_CREATE))
		return -EEXIST;
	if (have < 0 && (flags & META_XATTR_REPLACE))
		return -ENODATA;
	s = m->st[ST_XATTR_TOTAL];
	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	sqlite3_bind_blob(s, 2, name, (int)nlen, SQLITE_STATIC);
	rc = sqlite3_step(s);
	ret = rc == SQLITE_ROW ? 0 : sq_errno(rc);
	if (!ret && (uint64_t)sqlite3_column_double(s, 0) + nlen + 1 + len > META_XATTR_TOTAL_MAX)
		ret = -ENOSPC;
	sq_finish(s);
	if (ret)
		return ret;
	if (meta_fault(&m->base))
		return -EIO;
	s = m->st[have >= 0 ? ST_XATTR_UPDATE : ST_XATTR_INSERT];
	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	sqlite3_bind_blob(s, 2, name, (int)nlen, SQLITE_STATIC);
	/* A zero-length blob, never NULL (the column is NOT NULL). */
	sqlite3_bind_blob(s, 3, len ? value : "", (int)len, SQLITE_STATIC);
	return sq_step_done(m, s);
}

int sq_xattr_remove(struct meta *mb, uint64_t ino, const char *name)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_XATTR_REMOVE];
	int ret;

	if (meta_fault(&m->base))
		return -EIO;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	sqlite3_bind_blob(s, 2, name, (int)strlen(name), SQLITE_STATIC);
	ret = sq_step_done(m, s);
	if (!ret && sqlite3_changes(m->db) == 0)
		ret = -ENODATA;
	return ret;
}

ssize_t sq_xattr_list(struct meta *mb, uint64_t ino, char *buf, size_t cap)
{
	struct meta_sq *m = sq(mb);
	sqlite3_stmt *s = m->st[ST_XATTR_LIST];
	size_t used = 0;
	int rc;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)ino);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		size_t n = (size_t)sqlite3_column_bytes(s, 0);

		if (cap && used + n + 1 > cap) {
			sq_finish(s);
			return -ERANGE;
		}
		if (cap) {
			memcpy(buf + used, sqlite3_column_blob(s, 0), n);
			buf[used + n] = '\0';
		}
		used += n + 1;
	}
	sq_finish(s);
	return rc == SQLITE_DONE ? (ssize_t)used : sq_errno(rc);
}

