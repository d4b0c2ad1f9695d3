/*
 * sync.c: an object's commit and the durability barrier (DESIGN.md, rule 6).
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

int ofs_store_sync(struct ofs_store *s, pthread_mutex_t *meta_lock, uint64_t *released)
{
	uint64_t g, mark, n = 0;
	int ret;

	pthread_mutex_lock(&s->sync_lock);
	/*
	 * Commits from here on get a newer generation: this barrier may miss
	 * their data.  The backend's mark goes with it, in the same hold of
	 * the lock: a commit of the newer generation frees its old run after
	 * the mark, so that run waits for the barrier that covers the commit.
	 * Taken after the unlock, the mark could take in the run of a commit
	 * that the next commit of its object, seeing its generation unsynced,
	 * does not keep for recovery, keeping the released run instead.
	 */
	if (meta_lock)
		pthread_mutex_lock(meta_lock);
	g = s->gen++;
	mark = kvb_barrier_begin(&s->kvb);
	if (meta_lock)
		pthread_mutex_unlock(meta_lock);
	/* Data first: a durable record must never point at bytes that are not. */
	ret = kvb_barrier_sync(&s->kvb);
	if (!ret) {
		if (meta_lock)
			pthread_mutex_lock(meta_lock);
		ret = meta_sync_begin(s->meta, g);
		/*
		 * Set now, before the log's fsync: the data of generation <= g is
		 * durable already, and a commit that sees it keeps its old version
		 * for recovery, which is never wrong.  Set after, a commit in
		 * between would let go of a version the fsync then makes durable.
		 */
		if (!ret)
			s->synced_gen = g;
		if (meta_lock)
			pthread_mutex_unlock(meta_lock);
	}
	/* Outside the lock: on a shared ROOT this fsync is a network round trip. */
	if (!ret)
		ret = meta_sync_end(s->meta);
	/*
	 * A checkpoint inside a commit meanwhile syncs the same file, and the
	 * kernel reports a write error once: it may have taken ours.  Under
	 * the lock, so a checkpoint that failed has said so.
	 */
	if (!ret) {
		if (meta_lock)
			pthread_mutex_lock(meta_lock);
		if (meta_log_failed(s->meta))
			ret = -EIO;
		if (meta_lock)
			pthread_mutex_unlock(meta_lock);
	}
	if (!ret)
		n = kvb_release_freed(&s->kvb, mark);
	pthread_mutex_unlock(&s->sync_lock);
	if (released)
		*released = n;
	return ret;
}

void ofs_store_seed_sums(struct ofs_store *s, pthread_mutex_t *meta_lock,
			 const struct meta_inode *cur, struct kvb_obj *obj)
{
	uint64_t n = kvb_obj_sums_wanted(&s->kvb, obj), *pcs;
	int ret;

	if (!n || !(pcs = malloc(n * sizeof(*pcs))))
		return;
	if (meta_lock)
		pthread_mutex_lock(meta_lock);
	ret = cur->state != META_COMMITTED || cur->bucket < 0 || cur->npages != n ? -ESTALE
	      : cur->ext ? meta_extent_pcsums_get(s->meta, cur->ino, cur->ext - 1, pcs, n)
			 : meta_pcsums_get(s->meta, cur->ino, pcs, n);
	if (meta_lock)
		pthread_mutex_unlock(meta_lock);
	if (!ret) {
		struct kvb_map of = { cur->bucket, cur->page, cur->npages, cur->size, NULL };

		kvb_obj_sums_known(&s->kvb, obj, &of, pcs, n);
	}
	free(pcs);
}

int ofs_store_commit(struct ofs_store *s, pthread_mutex_t *meta_lock, struct meta_inode *cur,
		     struct kvb_obj *obj)
{
	const uint64_t *pcsums = NULL;
	struct meta_inode m;
	struct kvb_map map = { 0 };
	enum meta_skey_op op;
	uint64_t csum;
	int ret;

	ofs_store_seed_sums(s, meta_lock, cur, obj);
	ret = kvb_obj_commit_prepare(&s->kvb, obj, 0, &map, &csum, &pcsums);
	if (ret)
		return ret;
	if (meta_lock)
		pthread_mutex_lock(meta_lock);
	m = *cur;
	op = META_SKEY_SET;
	/* Keep the last version a barrier made durable, for recovery after a power cut. */
	if (cur->state == META_COMMITTED && cur->gen <= s->synced_gen) {
		op = META_SKEY_KEEP_PREV;
		m.prev_bucket = cur->bucket >= 0 ? cur->bucket : STORE_PREV_EMPTY;
		m.prev_page = cur->page;
		m.prev_npages = cur->npages;
		m.prev_size = cur->size;
		m.prev_csum = cur->csum;
	}
	m.size = map.size;
	m.bucket = map.bucket;
	m.page = map.page;
	m.npages = map.npages;
	m.csum = csum;
	m.state = META_COMMITTED;
	m.gen = s->gen;
	ret = meta_commit_object(s->meta, &m, pcsums, map.bucket >= 0 ? map.npages : 0,
				 map.bucket >= 0 ? map.skey : NULL, op);
	if (!ret) {
		*cur = m;
		ofs_epochs_bump(s, m.ino); /* before the pages it leaves can be reused */
	}
	if (meta_lock)
		pthread_mutex_unlock(meta_lock);
	kvb_obj_commit_done(&s->kvb, obj, ret == 0);
	return ret;
}
