/*
 * xattr.c: user extended attributes, one row per (inode, name); the
 * schema's trigger deletes an inode's with it.
 */
#include "pg_int.h"

#include <errno.h>
#include <string.h>

ssize_t pq_xattr_get(struct meta *mb, uint64_t ino, const char *name, void *buf, size_t cap)
{
	struct pq_params p = { 0 };
	PGresult *r;
	ssize_t ret;
	int rc;

	pq_int(&p, (int64_t)ino);
	pq_text(&p, name);
	r = pq_run(pq(mb), PQ_XATTR_GET, &p, &rc);
	if (!r)
		return rc;
	if (PQntuples(r)) {
		size_t n;
		const char *v = pq_get_blob(r, 0, 0, &n);

		ret = (ssize_t)n;
		if (cap && n > cap)
			ret = -ERANGE;
		else if (cap && n)
			memcpy(buf, v, n);
	} else {
		ret = -ENODATA;
	}
	PQclear(r);
	return ret;
}

int pq_xattr_set(struct meta *mb, uint64_t ino, const char *name, const void *value, size_t len,
		 int flags)
{
	struct meta_pg *m = pq(mb);
	struct pq_params p = { 0 }, q = { 0 };
	size_t nlen = strlen(name);
	PGresult *r;
	ssize_t have;
	int ret;

	if (nlen == 0 || nlen > META_XATTR_NAME_MAX)
		return nlen ? -ERANGE : -EINVAL;
	if (len > META_XATTR_SIZE_MAX)
		return -E2BIG;
	have = pq_xattr_get(mb, ino, name, NULL, 0);
	if (have < 0 && have != -ENODATA)
		return (int)have;
	if (have >= 0 && (flags & META_XATTR_CREATE))
		return -EEXIST;
	if (have < 0 && (flags & META_XATTR_REPLACE))
		return -ENODATA;
	pq_int(&q, (int64_t)ino);
	pq_text(&q, name);
	r = pq_run(m, PQ_XATTR_TOTAL, &q, &ret);
	if (!r)
		return ret;
	if ((uint64_t)pq_get_int(r, 0, 0) + nlen + 1 + len > META_XATTR_TOTAL_MAX)
		ret = -ENOSPC;
	PQclear(r);
	if (ret)
		return ret;
	if (meta_fault(mb))
		return -EIO;
	pq_int(&p, (int64_t)ino);
	pq_text(&p, name);
	pq_blob(&p, len ? value : "", len);
	return pq_done(m, have >= 0 ? PQ_XATTR_UPDATE : PQ_XATTR_INSERT, &p, NULL);
}

int pq_xattr_remove(struct meta *mb, uint64_t ino, const char *name)
{
	struct pq_params p = { 0 };
	uint64_t changed = 0;
	int ret;

	if (meta_fault(mb))
		return -EIO;
	pq_int(&p, (int64_t)ino);
	pq_text(&p, name);
	ret = pq_done(pq(mb), PQ_XATTR_REMOVE, &p, &changed);
	return !ret && changed == 0 ? -ENODATA : ret;
}

ssize_t pq_xattr_list(struct meta *mb, uint64_t ino, char *buf, size_t cap)
{
	struct pq_params p = { 0 };
	size_t used = 0;
	PGresult *r;
	int i, ret;

	pq_int(&p, (int64_t)ino);
	r = pq_run(pq(mb), PQ_XATTR_LIST, &p, &ret);
	if (!r)
		return ret;
	for (i = 0; i < PQntuples(r); i++) {
		size_t n;
		const char *v = pq_get_blob(r, i, 0, &n);

		if (cap && used + n + 1 > cap) {
			PQclear(r);
			return -ERANGE;
		}
		if (cap) {
			memcpy(buf + used, v, n);
			buf[used + n] = '\0';
		}
		used += n + 1;
	}
	PQclear(r);
	return (ssize_t)used;
}
