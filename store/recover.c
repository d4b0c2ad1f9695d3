/*
 * recover.c: what an unclean stop left: unsynced versions checked against
 * their checksums (reverted or dropped), values a KV store lost dropped.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "vec.h"

struct store_unsynced {
	struct meta_inode *v;
	size_t n, cap;
};

static int store_collect(void *ctx, const struct meta_inode *in)
{
	struct store_unsynced *u = ctx;

	if (u->n == u->cap) {
		size_t cap = u->cap ? u->cap * 2 : 64;
		struct meta_inode *v = realloc(u->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		u->v = v;
		u->cap = cap;
	}
	u->v[u->n++] = *in;
	return 0;
}

/*
 * After an unclean stop, a version committed after the last barrier may
 * have lost its data to a power cut while its record survived.  Check each
 * one against its checksum; fall back to the last durable version, or drop
 * the file when it had none.  After a daemon kill every check passes.
 */
int store_verify_unsynced(struct ofs_store *s)
{
	struct store_unsynced u = { 0 };
	size_t i;
	int ret;

	ret = meta_foreach_unsynced(s->meta, s->synced_gen, store_collect, &u);
	for (i = 0; !ret && i < u.n; i++) {
		struct meta_inode *in = &u.v[i];
		struct kvb_map map = { in->bucket, in->page, in->npages, in->size, NULL };

		if (kvb_checksum_ok(&s->kvb, &map, in->csum, NULL) == 1)
			continue;
		if (in->ext) {
			/*
			 * An extent falls back to its own durable version, or
			 * becomes a hole: the file keeps its size and its other
			 * extents, as a filesystem's blocks written after its
			 * last sync may be old or zeros after a power cut.
			 */
			if (in->prev_bucket >= 0) {
				in->bucket = in->prev_bucket;
				in->page = in->prev_page;
				in->npages = in->prev_npages;
				in->size = in->prev_size;
				in->csum = in->prev_csum;
				in->prev_bucket = -1;
				ret = meta_extent_commit(s->meta, in, NULL, 0, NULL,
							 META_SKEY_REVERT);
			} else {
				ret = meta_extent_delete(s->meta, in->ino, in->ext - 1);
			}
			s->reverted++;
			continue;
		}
		if (in->prev_bucket >= 0 || in->prev_bucket == STORE_PREV_EMPTY) {
			in->bucket = in->prev_bucket >= 0 ? in->prev_bucket : -1;
			in->page = in->prev_page;
			in->npages = in->prev_npages;
			in->size = in->prev_size;
			in->csum = in->prev_csum;
			in->prev_bucket = -1;
			ret = meta_commit_object(s->meta, in, NULL, 0, NULL, META_SKEY_REVERT);
			s->reverted++;
		} else {
			ret = meta_delete(s->meta, in->ino);
			s->dropped_corrupt++;
		}
	}
	free(u.v);
	if (!ret)
		ret = meta_prev_clear(s->meta);
	return ret;
}

/*
 * Values a KV store has lost without a power cut: the library keeps the
 * newest ones in a write-back cache inside this process, and evicts by
 * itself.  The ones the backend says are missing, as inode numbers.
 */
struct store_missing {
	struct ofs_store *s;
	struct kvb_map *maps;
	uint64_t *inos, *gone;
	int *res;
	size_t n, ngone, capgone;
};

#define STORE_PROBE_BATCH 16384

static int store_missing_flush(struct store_missing *m)
{
	size_t i;
	int ret = m->n ? kvb_probe(&m->s->kvb, m->maps, m->n, m->res) : 0;

	for (i = 0; !ret && i < m->n; i++) {
		if (m->res[i] == -ENOENT && vec_u64_push(&m->gone, &m->ngone, &m->capgone, m->inos[i]))
			return -ENOMEM;
	}
	m->n = 0;
	return ret;
}

static int store_missing_add(void *ctx, const struct meta_inode *in)
{
	struct store_missing *m = ctx;

	if (in->bucket < 0)
		return 0;
	m->maps[m->n] = (struct kvb_map){ in->bucket, in->page, in->npages, in->size, NULL };
	m->inos[m->n++] = in->ino;
	return m->n == STORE_PROBE_BATCH ? store_missing_flush(m) : 0;
}

/*
 * After an unclean stop, ask the backend for every recorded value (in
 * batches) and drop the files whose value is gone, as a cache miss: their
 * values are deleted (a no-op for a missing key) at the next barrier.
 */
int store_drop_missing(struct ofs_store *s)
{
	struct store_missing m = { .s = s };
	size_t i;
	int ret = 0;

	if (!kvb_has_probe(&s->kvb))
		return 0;
	m.maps = calloc(STORE_PROBE_BATCH, sizeof(*m.maps));
	m.inos = calloc(STORE_PROBE_BATCH, sizeof(*m.inos));
	m.res = calloc(STORE_PROBE_BATCH, sizeof(*m.res));
	if (!m.maps || !m.inos || !m.res)
		ret = -ENOMEM;
	if (!ret)
		ret = meta_foreach_mapping(s->meta, store_missing_add, &m);
	if (!ret)
		ret = store_missing_flush(&m);
	for (i = 0; !ret && i < m.ngone; i++) {
		struct meta_inode in;

		ret = meta_get(s->meta, m.gone[i], &in);
		if (ret == -ENOENT) {
			ret = 0;
			continue;
		}
		if (!ret && in.bucket >= 0) {
			struct kvb_map map = { in.bucket, in.page, in.npages, in.size, NULL };

			ret = kvb_remove_prepare(&s->kvb, &map);
		}
		if (!ret)
			ret = meta_delete(s->meta, in.ino);
		if (!ret && in.bucket >= 0) {
			struct kvb_map map = { in.bucket, in.page, in.npages, in.size, NULL };

			kvb_remove(&s->kvb, &map);
			s->dropped_missing++;
		}
	}
	free(m.maps);
	free(m.inos);
	free(m.res);
	free(m.gone);
	return ret;
}
