/*
 * ns.c: the namespace: one row per file or directory, found by (parent,
 * name); names and key lengths; directory times.  Link counts of
 * directories are kept by the schema's trigger (open.c).
 */
#include "pg_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Run st with $1 = id and the row as *out: -ENOENT when it has none. */
static int pq_one_inode(struct meta_pg *m, int st, struct pq_params *p, struct meta_inode *out)
{
	int ret;
	PGresult *r = pq_run(m, st, p, &ret);

	if (!r)
		return ret;
	if (PQntuples(r))
		pq_row_inode(r, 0, out);
	else
		ret = -ENOENT;
	PQclear(r);
	return ret;
}

int pq_get(struct meta *mb, uint64_t ino, struct meta_inode *out)
{
	struct pq_params p = { 0 };

	pq_int(&p, (int64_t)ino);
	return pq_one_inode(pq(mb), PQ_GET, &p, out);
}

int pq_lookup(struct meta *mb, uint64_t parent, const char *name, size_t len,
	      struct meta_inode *out)
{
	struct pq_params p = { 0 };

	if (len > META_NAME_MAX)
		return -ENAMETOOLONG;
	pq_int(&p, (int64_t)parent);
	pq_blob(&p, name, len);
	return pq_one_inode(pq(mb), PQ_LOOKUP, &p, out);
}

int pq_lookup_brief(struct meta *mb, uint64_t parent, const char *name, size_t len,
		    struct meta_inode *out)
{
	struct pq_params p = { 0 };
	PGresult *r;
	int ret;

	if (len > META_NAME_MAX)
		return -ENAMETOOLONG;
	pq_int(&p, (int64_t)parent);
	pq_blob(&p, name, len);
	r = pq_run(pq(mb), PQ_LOOKUP_BRIEF, &p, &ret);
	if (!r)
		return ret;
	if (PQntuples(r)) {
		memset(out, 0, sizeof(*out));
		out->ino = (uint64_t)pq_get_int(r, 0, 0);
		out->mode = (uint32_t)pq_get_int(r, 0, 1);
		out->state = (int)pq_get_int(r, 0, 2);
		out->size = (uint64_t)pq_get_int(r, 0, 3);
		out->bucket = (int32_t)pq_get_int(r, 0, 4);
		out->page = (uint64_t)pq_get_int(r, 0, 5);
		out->npages = (uint64_t)pq_get_int(r, 0, 6);
		out->csum = (uint64_t)pq_get_int(r, 0, 7);
		out->prev_bucket = -1;
	} else {
		ret = -ENOENT;
	}
	PQclear(r);
	return ret;
}

int pq_name(struct meta *mb, uint64_t ino, uint64_t *parent, char *name, size_t *len)
{
	struct pq_params p = { 0 };
	PGresult *r;
	int ret;

	pq_int(&p, (int64_t)ino);
	r = pq_run(pq(mb), PQ_NAME, &p, &ret);
	if (!r)
		return ret;
	if (PQntuples(r) && !PQgetisnull(r, 0, 0)) {
		size_t n;
		const char *v = pq_get_blob(r, 0, 1, &n);

		*parent = (uint64_t)pq_get_int(r, 0, 0);
		if (n > META_NAME_MAX) {
			ret = -EUCLEAN;
		} else {
			if (n)
				memcpy(name, v, n);
			*len = n;
		}
	} else {
		ret = -ENOENT;
	}
	PQclear(r);
	return ret;
}

int pq_key_len(struct meta *mb, uint64_t ino, size_t *len)
{
	char name[META_NAME_MAX + 1];
	size_t total = 0, n;
	uint64_t parent;
	int ret, depth = 0;

	/* From ino up to its tenant (not counted). */
	while (ino != META_ROOT_INO) {
		if (depth++ > META_KEY_MAX)
			return -ELOOP;
		ret = pq_name(mb, ino, &parent, name, &n);
		if (ret)
			return ret;
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

int pq_subtree_depth(struct meta *mb, uint64_t dir, size_t *len)
{
	struct meta_pg *m = pq(mb);
	char sql[512];
	PGresult *r;
	int ret = 0;

	*len = 0;
	/* Walks the whole subtree: only a rename of a directory to a longer key asks. */
	snprintf(sql, sizeof(sql),
		 "WITH RECURSIVE sub(ino, len) AS ("
		 " SELECT ino, length(name)::bigint FROM " PQ_SCHEMA ".inodes WHERE parent = %llu"
		 " UNION ALL SELECT i.ino, sub.len + 1 + length(i.name)"
		 " FROM " PQ_SCHEMA ".inodes i JOIN sub ON i.parent = sub.ino)"
		 " SELECT coalesce(max(len), 0) FROM sub",
		 (unsigned long long)dir);
	r = pq_query(m, sql, NULL, &ret);
	if (r && PQntuples(r))
		*len = (size_t)strtoull(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return ret;
}

int pq_dir_changed(struct meta *mb, uint64_t dir, int64_t now, uint32_t *nlink)
{
	struct meta_pg *m = pq(mb);
	struct pq_params p = { 0 };
	PGresult *r;
	int ret;

	if (meta_fault(mb))
		return -EIO;
	pq_int(&p, (int64_t)dir);
	pq_int(&p, now);
	r = pq_run(m, PQ_DIR_CHANGED, &p, &ret);
	if (!r)
		return ret;
	if (!PQntuples(r))
		ret = -ENOENT;
	else if (nlink)
		*nlink = (uint32_t)pq_get_int(r, 0, 0);
	PQclear(r);
	return ret;
}

static void pq_bind_new_inode(struct pq_params *p, const struct meta_inode *in, const char *name,
			      size_t len)
{
	pq_int(p, (int64_t)in->parent);
	pq_blob(p, name, len);
	pq_int(p, in->mode);
	pq_int(p, in->uid);
	pq_int(p, in->gid);
	pq_int(p, in->atime);
	pq_int(p, in->mtime);
	pq_int(p, in->ctime);
	pq_int(p, (int64_t)in->size);
	pq_int(p, in->bucket);
	pq_int(p, (int64_t)in->page);
	pq_int(p, (int64_t)in->npages);
	pq_int(p, (int64_t)in->csum);
	pq_int(p, in->state);
}

/* An insert that returns the new ino, or no row when the name is taken. */
static int pq_insert_returning(struct meta_pg *m, int st, struct pq_params *p,
			       struct meta_inode *in)
{
	int ret;
	PGresult *r = pq_run(m, st, p, &ret);

	if (!r)
		return ret;
	if (PQntuples(r))
		in->ino = (uint64_t)pq_get_int(r, 0, 0);
	else
		ret = -EEXIST;
	PQclear(r);
	return ret;
}

int pq_insert_row(struct meta_pg *m, struct meta_inode *in, const char *name, size_t len)
{
	struct pq_params p = { 0 };

	pq_bind_new_inode(&p, in, name, len);
	return pq_insert_returning(m, PQ_INSERT, &p, in);
}

int pq_insert(struct meta *mb, struct meta_inode *in, const char *name, size_t len)
{
	if (meta_fault(mb))
		return -EIO;
	if (len == 0 || len > META_NAME_MAX)
		return len ? -ENAMETOOLONG : -EINVAL;
	return pq_insert_row(pq(mb), in, name, len);
}

int pq_insert_object(struct meta *mb, struct meta_inode *in, const char *name, size_t len,
		     const uint64_t *pcsums, uint64_t n)
{
	struct pq_params p = { 0 };

	if (meta_fault(mb))
		return -EIO;
	if (len == 0 || len > META_NAME_MAX)
		return len ? -ENAMETOOLONG : -EINVAL;
	if ((in->mode & 0170000) != 0100000)
		return -EINVAL;
	pq_bind_new_inode(&p, in, name, len);
	pq_int(&p, (int64_t)in->gen);
	pq_blob(&p, n ? pcsums : NULL, n * sizeof(uint64_t));
	return pq_insert_returning(pq(mb), PQ_INSERT_OBJECT, &p, in);
}

/* A write of one row by ino: -ENOENT when it changed none. */
static int pq_write_one(struct meta *mb, int st, struct pq_params *p)
{
	uint64_t changed = 0;
	int ret;

	ret = pq_done(pq(mb), st, p, &changed);
	return !ret && changed == 0 ? -ENOENT : ret;
}

int pq_delete(struct meta *mb, uint64_t ino)
{
	struct pq_params p = { 0 };

	if (meta_fault(mb))
		return -EIO;
	pq_int(&p, (int64_t)ino);
	return pq_write_one(mb, PQ_DELETE, &p);
}

int pq_detach(struct meta *mb, uint64_t ino)
{
	struct pq_params p = { 0 };

	if (meta_fault(mb))
		return -EIO;
	pq_int(&p, (int64_t)ino);
	return pq_write_one(mb, PQ_DETACH, &p);
}

int pq_move(struct meta *mb, uint64_t ino, uint64_t newparent, const char *name, size_t len)
{
	struct pq_params p = { 0 }, q = { 0 };
	PGresult *r;
	int ret;

	if (meta_fault(mb))
		return -EIO;
	if (len == 0 || len > META_NAME_MAX)
		return len ? -ENAMETOOLONG : -EINVAL;
	pq_int(&p, (int64_t)ino);
	pq_int(&p, (int64_t)newparent);
	pq_blob(&p, name, len);
	ret = pq_write_one(mb, PQ_MOVE, &p);
	if (ret != -ENOENT)
		return ret;
	/* Nothing moved: the name is taken, or there is no such ino. */
	pq_int(&q, (int64_t)newparent);
	pq_blob(&q, name, len);
	r = pq_run(pq(mb), PQ_MOVE_TAKEN, &q, &ret);
	if (!r)
		return ret;
	ret = PQntuples(r) ? -EEXIST : -ENOENT;
	PQclear(r);
	return ret;
}

int pq_has_children(struct meta *mb, uint64_t dir)
{
	struct pq_params p = { 0 };
	PGresult *r;
	int ret;

	pq_int(&p, (int64_t)dir);
	r = pq_run(pq(mb), PQ_HAS_CHILDREN, &p, &ret);
	if (!r)
		return ret;
	ret = PQntuples(r) > 0;
	PQclear(r);
	return ret;
}

int pq_readdir(struct meta *mb, uint64_t dir, uint64_t after, meta_dirent_fn fn, void *ctx)
{
	struct meta_inode in;
	int i, n, ret = 0;

	do {
		struct pq_params p = { 0 };
		PGresult *r;

		pq_int(&p, (int64_t)dir);
		pq_int(&p, (int64_t)after);
		r = pq_run(pq(mb), PQ_READDIR, &p, &ret);
		if (!r)
			return ret;
		n = PQntuples(r);
		for (i = 0; i < n && !ret; i++) {
			size_t len;
			const char *name = pq_get_blob(r, i, PQ_INODE_NCOLS, &len);

			pq_row_inode(r, i, &in);
			ret = fn(ctx, &in, name ? name : "", len);
			after = in.ino;
		}
		PQclear(r);
	} while (!ret && n == 512);
	return ret;
}
