/*
 * extent.c: the extents of files larger than one extent: each one's
 * committed version and the last durable one, as an inode row keeps them
 * for a file of one run.
 */
#include "pg_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pq_extent_commit(struct meta *mb, const struct meta_inode *e, const uint64_t *pcsums,
		     uint64_t n, const char *skey, enum meta_skey_op op)
{
	struct pq_params p = { 0 };

	if (meta_fault(mb))
		return -EIO;
	if (e->ext == 0)
		return -EINVAL;
	pq_int(&p, (int64_t)e->ino);
	pq_int(&p, (int64_t)(e->ext - 1));
	pq_int(&p, (int64_t)e->size);
	pq_int(&p, e->bucket);
	pq_int(&p, (int64_t)e->page);
	pq_int(&p, (int64_t)e->npages);
	pq_int(&p, (int64_t)e->csum);
	pq_int(&p, (int64_t)e->gen);
	pq_int(&p, e->prev_bucket);
	pq_int(&p, (int64_t)e->prev_page);
	pq_int(&p, (int64_t)e->prev_npages);
	pq_int(&p, (int64_t)e->prev_size);
	pq_int(&p, (int64_t)e->prev_csum);
	pq_blob(&p, n ? pcsums : NULL, n * sizeof(uint64_t));
	pq_blob(&p, skey, skey ? strlen(skey) : 0);
	pq_int(&p, (int)op);
	return pq_done(pq(mb), PQ_EXTENT_COMMIT, &p, NULL);
}

int pq_extent_delete(struct meta *mb, uint64_t ino, uint64_t idx)
{
	struct pq_params p = { 0 };
	uint64_t changed = 0;
	int ret;

	if (meta_fault(mb))
		return -EIO;
	pq_int(&p, (int64_t)ino);
	pq_int(&p, (int64_t)idx);
	ret = pq_done(pq(mb), PQ_EXTENT_DELETE, &p, &changed);
	return !ret && changed == 0 ? -ENOENT : ret;
}

int pq_extent_pcsums_get(struct meta *mb, uint64_t ino, uint64_t idx, uint64_t *pcsums,
			 uint64_t n)
{
	struct pq_params p = { 0 };

	pq_int(&p, (int64_t)ino);
	pq_int(&p, (int64_t)idx);
	return pq_pcsums_row(pq(mb), PQ_EXTENT_PCSUMS, &p, pcsums, n);
}

/* Run sql with $1 = ino: a rare statement (a file changing form), not prepared. */
static int pq_run_ino(struct meta_pg *m, const char *sql, uint64_t ino)
{
	struct pq_params p = { 0 };
	PGresult *r;
	int ret;

	pq_int(&p, (int64_t)ino);
	r = pq_query(m, sql, &p, &ret);
	PQclear(r);
	return ret;
}

int pq_extent_from_row(struct meta *mb, uint64_t ino)
{
	struct meta_pg *m = pq(mb);
	int ret;

	if (meta_fault(mb))
		return -EIO;
	ret = pq_run_ino(m,
			 "INSERT INTO " PQ_SCHEMA ".extents (ino, idx, size, bucket, page, npages, "
			 "csum, gen, prev_bucket, prev_page, prev_npages, prev_size, prev_csum, "
			 "pcsums, skey, prev_skey) SELECT ino, 0, size, bucket, page, npages, csum, "
			 "gen, prev_bucket, prev_page, prev_npages, prev_size, prev_csum, pcsums, "
			 "skey, prev_skey FROM " PQ_SCHEMA ".inodes WHERE ino = $1 AND bucket >= 0",
			 ino);
	return ret ? ret
		   : pq_run_ino(m,
				"UPDATE " PQ_SCHEMA ".inodes SET pcsums = NULL, skey = NULL, "
				"prev_skey = NULL, prev_bucket = -1 WHERE ino = $1",
				ino);
}

int pq_extent_to_row(struct meta *mb, uint64_t ino)
{
	struct meta_pg *m = pq(mb);
	int ret;

	if (meta_fault(mb))
		return -EIO;
	ret = pq_run_ino(m,
			 "UPDATE " PQ_SCHEMA ".inodes SET (size, bucket, page, npages, csum, gen, "
			 "prev_bucket, prev_page, prev_npages, prev_size, prev_csum, pcsums, skey, "
			 "prev_skey) = (SELECT size, bucket, page, npages, csum, gen, prev_bucket, "
			 "prev_page, prev_npages, prev_size, prev_csum, pcsums, skey, prev_skey FROM "
			 PQ_SCHEMA ".extents WHERE ino = $1 AND idx = 0) WHERE ino = $1 AND EXISTS "
			 "(SELECT 1 FROM " PQ_SCHEMA ".extents WHERE ino = $1 AND idx = 0)",
			 ino);
	return ret ? ret
		   : pq_run_ino(m, "DELETE FROM " PQ_SCHEMA ".extents WHERE ino = $1", ino);
}

int pq_extents_stray(struct meta *mb, int drop, uint64_t *n)
{
	struct meta_pg *m = pq(mb);
	PGresult *r;
	int ret = 0;

	*n = 0;
	r = pq_query(m, drop ? "DELETE FROM " PQ_SCHEMA ".extents WHERE ino NOT IN "
			       "(SELECT ino FROM " PQ_SCHEMA ".inodes)"
			     : "SELECT count(*) FROM " PQ_SCHEMA ".extents WHERE ino NOT IN "
			       "(SELECT ino FROM " PQ_SCHEMA ".inodes)",
		     NULL, &ret);
	if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r))
		*n = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
	else if (r)
		*n = strtoull(PQcmdTuples(r), NULL, 10);
	PQclear(r);
	return ret;
}
