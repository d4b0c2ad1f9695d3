/*
 * object.c: objects: each committed version's mapping, the previous
 * durable version, the walks over mappings and values, and the recovery
 * queries after an unclean stop.
 */
#include "pg_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void pq_bind_update(struct pq_params *p, const struct meta_inode *in)
{
	pq_int(p, (int64_t)in->ino);
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
	pq_int(p, (int64_t)in->gen);
	pq_int(p, in->prev_bucket);
	pq_int(p, (int64_t)in->prev_page);
	pq_int(p, (int64_t)in->prev_npages);
	pq_int(p, (int64_t)in->prev_size);
	pq_int(p, (int64_t)in->prev_csum);
}

static int pq_one_row(struct meta *mb, int st, struct pq_params *p)
{
	uint64_t changed = 0;
	int ret = pq_done(pq(mb), st, p, &changed);

	return !ret && changed == 0 ? -ENOENT : ret;
}

int pq_update(struct meta *mb, const struct meta_inode *in)
{
	struct pq_params p = { 0 };

	if (meta_fault(mb))
		return -EIO;
	pq_bind_update(&p, in);
	return pq_one_row(mb, PQ_UPDATE, &p);
}

int pq_commit_object(struct meta *mb, const struct meta_inode *in, const uint64_t *pcsums,
		     uint64_t n, const char *skey, enum meta_skey_op op)
{
	struct pq_params p = { 0 };

	if (meta_fault(mb))
		return -EIO;
	pq_bind_update(&p, in);
	pq_blob(&p, n ? pcsums : NULL, n * sizeof(uint64_t));
	pq_blob(&p, skey, skey ? strlen(skey) : 0);
	pq_int(&p, (int)op);
	return pq_one_row(mb, PQ_COMMIT_OBJECT, &p);
}

/* Column c of row i as a NUL-terminated key in buf, or NULL; -EUCLEAN when it cannot be one. */
static int pq_col_key(const PGresult *r, int i, int c, char *buf, const char **out)
{
	size_t len;
	const char *v = pq_get_blob(r, i, c, &len);

	*out = NULL;
	if (!v)
		return 0;
	if (len == 0 || len > META_SKEY_MAX || memchr(v, 0, len))
		return -EUCLEAN;
	memcpy(buf, v, len);
	buf[len] = '\0';
	*out = buf;
	return 0;
}

int pq_foreach_value(struct meta *mb, meta_value_fn fn, void *ctx)
{
	static __thread char key[META_SKEY_MAX + 1], prev[META_SKEY_MAX + 1];
	struct meta_inode in;
	const char *k, *p;
	PGresult *r;
	int i, ret;

	r = pq_run(pq(mb), PQ_VALUES, NULL, &ret);
	if (!r)
		return ret;
	for (i = 0; i < PQntuples(r) && !ret; i++) {
		pq_row_mapping(r, i, &in);
		ret = pq_col_key(r, i, PQ_INODE_NCOLS + 1, key, &k);
		if (!ret)
			ret = pq_col_key(r, i, PQ_INODE_NCOLS + 2, prev, &p);
		if (!ret)
			ret = fn(ctx, &in, k, p);
	}
	PQclear(r);
	return ret;
}

/* The pcsums column of st's one row: -ENOENT when none, -EUCLEAN when not n sums. */
int pq_pcsums_row(struct meta_pg *m, int st, struct pq_params *p, uint64_t *pcsums, uint64_t n)
{
	PGresult *r;
	size_t len;
	const char *v;
	int ret;

	r = pq_run(m, st, p, &ret);
	if (!r)
		return ret;
	v = PQntuples(r) ? pq_get_blob(r, 0, 0, &len) : NULL;
	if (!v)
		ret = -ENOENT;
	else if (len != n * sizeof(uint64_t))
		ret = -EUCLEAN;
	else
		memcpy(pcsums, v, len);
	PQclear(r);
	return ret;
}

int pq_pcsums_get(struct meta *mb, uint64_t ino, uint64_t *pcsums, uint64_t n)
{
	struct pq_params p = { 0 };

	pq_int(&p, (int64_t)ino);
	return pq_pcsums_row(pq(mb), PQ_PCSUMS_GET, &p, pcsums, n);
}

static int pq_walk(struct meta *mb, int st, struct pq_params *p, meta_ino_fn fn, void *ctx)
{
	int ret;
	PGresult *r = pq_run(pq(mb), st, p, &ret);

	if (!r)
		return ret;
	ret = pq_each_inode(r, 1, fn, ctx);
	PQclear(r);
	return ret;
}

int pq_foreach_unsynced(struct meta *mb, uint64_t gen, meta_ino_fn fn, void *ctx)
{
	struct pq_params p = { 0 };

	pq_int(&p, (int64_t)gen);
	return pq_walk(mb, PQ_UNSYNCED, &p, fn, ctx);
}

int pq_foreach_mapping(struct meta *mb, meta_ino_fn fn, void *ctx)
{
	return pq_walk(mb, PQ_MAPPINGS, NULL, fn, ctx);
}

int pq_extents(struct meta *mb, uint64_t ino, meta_ino_fn fn, void *ctx)
{
	struct pq_params p = { 0 };

	pq_int(&p, (int64_t)ino);
	return pq_walk(mb, PQ_EXTENTS, &p, fn, ctx);
}

int pq_prev_clear(struct meta *mb)
{
	struct meta_pg *m = pq(mb);
	int ret = pq_exec(m, "UPDATE " PQ_SCHEMA ".inodes SET prev_bucket = -1, prev_npages = 0, "
			     "prev_skey = NULL WHERE prev_bucket <> -1 OR prev_skey IS NOT NULL",
			  NULL);

	return ret ? ret
		   : pq_exec(m, "UPDATE " PQ_SCHEMA ".extents SET prev_bucket = -1, "
				"prev_npages = 0, prev_skey = NULL "
				"WHERE prev_bucket <> -1 OR prev_skey IS NOT NULL",
			     NULL);
}

int pq_count_unsettled(struct meta *mb, uint64_t *new_files, uint64_t *orphans)
{
	struct meta_pg *m = pq(mb);
	PGresult *r;
	int ret = 0;

	*new_files = *orphans = 0;
	r = pq_query(m, "SELECT count(*) FILTER (WHERE parent IS NOT NULL AND state = 1), "
			    "count(*) FILTER (WHERE parent IS NULL) FROM " PQ_SCHEMA ".inodes "
			    "WHERE state = 1 OR parent IS NULL", NULL, &ret);
	if (r && PQntuples(r)) {
		*new_files = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
		*orphans = strtoull(PQgetvalue(r, 0, 1), NULL, 10);
	}
	PQclear(r);
	return ret;
}

int pq_recover(struct meta *mb, uint64_t *dropped_new, uint64_t *dropped_orphans)
{
	struct meta_pg *m = pq(mb);
	int ret;

	*dropped_new = *dropped_orphans = 0;
	ret = pq_begin(mb);
	if (ret)
		return ret;
	ret = pq_exec(m, "DELETE FROM " PQ_SCHEMA ".inodes WHERE parent IS NULL", dropped_orphans);
	if (!ret)
		ret = pq_exec(m, "DELETE FROM " PQ_SCHEMA ".inodes WHERE state = 1", dropped_new);
	if (!ret)
		return pq_commit(mb);
	pq_rollback(mb);
	return ret;
}

/*
 * The server checks its own pages (data checksums, when the cluster has
 * them, fail the read that meets a bad one); nothing here to walk.
 */
int pq_integrity(struct meta *mb, char *first, size_t firstlen)
{
	(void)mb;
	if (firstlen)
		first[0] = '\0';
	return 0;
}

static int pq_count(struct meta *mb, int st, uint64_t *n)
{
	int ret;
	PGresult *r = pq_run(pq(mb), st, NULL, &ret);

	if (!r)
		return ret;
	*n = (uint64_t)pq_get_int(r, 0, 0);
	PQclear(r);
	return 0;
}

int pq_count_files(struct meta *mb, uint64_t *n)
{
	return pq_count(mb, PQ_COUNT_FILES, n);
}

int pq_count_mappings(struct meta *mb, uint64_t *n)
{
	return pq_count(mb, PQ_COUNT_MAPPINGS, n);
}
