/*
 * snapshot.c: what a clean unmount leaves: the clean flag, and a snapshot
 * of each bucket's allocation bitmap.
 */
#include "pg_int.h"

#include <errno.h>
#include <string.h>

int pq_clean_get(struct meta *mb, int *clean)
{
	int64_t v = 0;
	int ret = pq_kv_get(pq(mb), "clean", &v, NULL, 0);

	*clean = ret == 0 && v == 1;
	return ret == -ENOENT ? 0 : ret;
}

int pq_clean_set(struct meta *mb, int clean)
{
	/* Commits may be gone with the server: the next mount must recover, not trust. */
	if (clean && pq_is_lost(pq(mb)))
		return -EIO;
	return pq_kv_set_int(pq(mb), "clean", clean ? 1 : 0);
}

int pq_bitmap_save(struct meta *mb, uint32_t bucket, uint64_t npages, const uint64_t *words,
		   uint64_t nwords)
{
	struct pq_params p = { 0 };

	pq_int(&p, bucket);
	pq_int(&p, (int64_t)npages);
	pq_blob(&p, words, nwords * sizeof(uint64_t));
	return pq_done(pq(mb), PQ_BITMAP_SAVE, &p, NULL);
}

int pq_bitmap_load(struct meta *mb, uint32_t bucket, uint64_t npages, uint64_t *words,
		   uint64_t nwords)
{
	struct pq_params p = { 0 };
	PGresult *r;
	size_t len;
	const char *v;
	int ret;

	pq_int(&p, bucket);
	r = pq_run(pq(mb), PQ_BITMAP_LOAD, &p, &ret);
	if (!r)
		return ret;
	if (!PQntuples(r)) {
		ret = -ENOENT;
	} else {
		v = pq_get_blob(r, 0, 1, &len);
		if ((uint64_t)pq_get_int(r, 0, 0) != npages || len != nwords * sizeof(uint64_t))
			ret = -EINVAL;
		else
			memcpy(words, v, len);
	}
	PQclear(r);
	return ret;
}

int pq_bitmap_clear(struct meta *mb)
{
	return pq_exec(pq(mb), "DELETE FROM " PQ_SCHEMA ".bitmaps", NULL);
}
