/*
 * object.c: an object's working state: opened, written (and poisoned when
 * a write is lost), truncated, allocated, committed, closed; the barrier
 * as a writer meets it.  See object.h.
 */
#include "object.h"

#include <assert.h>
#include <errno.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>

struct ofs_object *ofs_object_find(struct ofs_store *s, uint64_t ino)
{
	struct htab_node *n = s->objects ? htab_find(s->objects, ino) : NULL;

	return n ? htab_entry(n, struct ofs_object, node) : NULL;
}

int ofs_object_insert(struct ofs_store *s, struct ofs_object *o)
{
	/* Made at the first insert: offloadctl and most tests keep no objects. */
	if (!s->objects) {
		struct htab *t = malloc(sizeof(*t));

		if (!t || htab_init(t)) {
			free(t);
			return -ENOMEM;
		}
		s->objects = t;
	}
	assert(!htab_find(s->objects, o->m.ino));
	o->node.key = o->m.ino;
	htab_insert(s->objects, &o->node);
	return 0;
}

void ofs_object_remove(struct ofs_store *s, struct ofs_object *o)
{
	htab_remove(s->objects, &o->node);
}

struct ofs_object *ofs_object_pop(struct ofs_store *s)
{
	struct htab_node *n = s->objects ? htab_pop(s->objects) : NULL;

	return n ? htab_entry(n, struct ofs_object, node) : NULL;
}

void ofs_object_settle(struct ofs_store *s, struct ofs_object *o)
{
	struct kvb_map map;
	int ret;

	if (o->nopen != 0 || o->unlinked != 2)
		return;
	assert(!o->obj); /* no writer: each holds an open */
	map = ofs_committed(&o->m);
	ret = map.bucket >= 0 ? kvb_remove_prepare(&s->kvb, &map) : 0;
	if (!ret)
		ret = meta_delete(s->meta, o->m.ino);
	if (ret)
		ofs_log("cannot delete unlinked inode %llu: %s (recovered at next mount)",
			(unsigned long long)o->m.ino, meta_errmsg(s->meta));
	else if (map.bucket >= 0)
		kvb_remove(&s->kvb, &map);
	o->unlinked = 1;
}

int ofs_store_barrier(struct ofs_store *s, uint64_t *released)
{
	int ret = ofs_store_sync(s, &s->lock, released);

	OFS_COUNT(s->metrics.barriers, 1);
	if (ret)
		ofs_log("sync failed: %s", strerror(-ret));
	return ret;
}

int ofs_store_reclaim(struct ofs_store *s)
{
	uint64_t released = 0;

	/* A cache makes room: freed pages released, else the least recently used go (evict.h). */
	if (s->evict.on)
		return ofs_evict_for_put(s);
	return ofs_store_barrier(s, &released) == 0 && released > 0;
}

int ofs_object_open(struct ofs_store *s, struct ofs_object *o)
{
	struct kvb_map c = ofs_committed(&o->m);
	char key[OFS_KEY_MAX];
	size_t klen = 0;
	struct kvb_obj *obj;
	int ret;

	/* The path with its tenant: a KV backend names values by all of it. */
	pthread_mutex_lock(&s->lock);
	ret = meta_path(s->meta, o->m.ino, 1, key, OFS_KEY_MAX, &klen, NULL);
	pthread_mutex_unlock(&s->lock);
	if (ret == -ENOENT)
		klen = 0;
	else if (ret)
		return ret;
	ret = kvb_obj_open(&s->kvb, &c, key, klen, &obj);
	if (ret)
		return ret;
	pthread_mutex_lock(&s->lock);
	o->obj = obj;
	pthread_mutex_unlock(&s->lock);
	o->werr = 0;
	return 0;
}

void ofs_object_close(struct ofs_store *s, struct ofs_object *o)
{
	struct kvb_obj *obj = o->obj;

	pthread_mutex_lock(&s->lock);
	o->obj = NULL;
	pthread_mutex_unlock(&s->lock);
	o->werr = 0;
	kvb_obj_close(&s->kvb, obj);
}

int ofs_object_commit(struct ofs_store *s, struct ofs_object *o, int sync)
{
	int ret;

	if (o->obj && o->werr) {
		OFS_COUNT(s->metrics.commit_failures, 1);
		return o->werr;
	}
	if (!o->obj || (!kvb_obj_dirty(&s->kvb, o->obj) && o->m.state == META_COMMITTED))
		return sync ? ofs_store_barrier(s, NULL) : 0;
	ret = ofs_store_commit(s, &s->lock, &o->m, o->obj);
	if (ret) {
		OFS_COUNT(s->metrics.commit_failures, 1);
		ofs_log("commit of inode %llu failed: %s", (unsigned long long)o->m.ino,
			strerror(-ret));
		return ret;
	}
	OFS_COUNT(s->metrics.objects_committed, 1);
	/* Above the high watermark the worker evicts now, ahead of the next writers. */
	ofs_evict_poke(s);
	if (s->dram_capacity)
		ofs_dram_drop(&s->dram, o->m.ino);
	pthread_mutex_lock(&s->lock);
	free(o->pcs);
	o->pcs = NULL;
	pthread_mutex_unlock(&s->lock);
	return sync ? ofs_store_barrier(s, NULL) : 0;
}

/*
 * A write into o's working state failed.  The writer may be the kernel
 * writing back pages it already acknowledged (mmap, cached writes), whose
 * bytes are now lost: the working state is poisoned, so that no later
 * flush, fsync or release commits it with zeros or old bytes in their
 * place.
 */
static void object_poison(struct ofs_store *s, struct ofs_object *o, int err, uint64_t off,
			  size_t len)
{
	char key[OFS_KEY_MAX];
	size_t klen = 0;

	o->werr = err;
	pthread_mutex_lock(&s->lock);
	if (meta_path(s->meta, o->m.ino, 1, key, sizeof(key) - 1, &klen, NULL))
		klen = 0;
	pthread_mutex_unlock(&s->lock);
	key[klen] = '\0';
	ofs_log("write of %zu bytes at %llu to '%s' (inode %llu) failed: %s; the file keeps its "
		"last committed content, and its writers' flush, fsync and close fail",
		len, (unsigned long long)off, klen ? key : "(unlinked)",
		(unsigned long long)o->m.ino, strerror(-err));
}

/* Eviction off and a tenant with a quota: may o grow to end?  0 or -EDQUOT. */
static int object_quota(struct ofs_store *s, struct ofs_object *o, uint64_t end)
{
	struct kvb_map view;

	if (s->evict.on)
		return 0;
	kvb_obj_view(&s->kvb, o->obj, &view);
	return end > view.size ? ofs_evict_quota_write(s, o, end - view.size) : 0;
}

ssize_t ofs_object_write(struct ofs_store *s, struct ofs_object *o, const void *buf, size_t size,
			 uint64_t off)
{
	ssize_t n;
	int low = 0;

	if (!o->obj)
		n = -EBADF;
	else if (o->werr)
		n = o->werr;
	else if ((low = ofs_store_meta_low(s)))
		n = -ENOSPC; /* its commit could not be recorded */
	else if ((n = object_quota(s, o, off + size)) == 0)
		n = kvb_obj_write(&s->kvb, o->obj, buf, size, off);
	if (n == -ENOSPC && o->obj && !o->werr && !low && ofs_store_reclaim(s))
		n = kvb_obj_write(&s->kvb, o->obj, buf, size, off);
	if (n < 0 && o->obj && !o->werr)
		object_poison(s, o, (int)n, off, size);
	if (n > 0) {
		int64_t now = ofs_now();

		pthread_mutex_lock(&s->lock);
		o->m.mtime = o->m.ctime = now;
		pthread_mutex_unlock(&s->lock);
		OFS_COUNT(s->metrics.bytes_written, (uint64_t)n);
	}
	return n;
}

int ofs_object_truncate(struct ofs_store *s, struct ofs_object *o, uint64_t size)
{
	int ret = kvb_obj_truncate(&s->kvb, o->obj, size);

	if (ret == -ENOSPC && ofs_store_reclaim(s))
		ret = kvb_obj_truncate(&s->kvb, o->obj, size);
	return ret;
}

/* Zeros for punched and zeroed ranges (never written: it stays in .bss). */
static char object_zeros[1u << 20];

/* Write zeros over [off, end) of the working state. */
static int object_zero_range(struct ofs_store *s, struct ofs_object *o, uint64_t off,
			     uint64_t end)
{
	while (off < end) {
		size_t n = end - off < sizeof(object_zeros) ? (size_t)(end - off)
							     : sizeof(object_zeros);
		ssize_t w = kvb_obj_write(&s->kvb, o->obj, object_zeros, n, off);

		if (w == -ENOSPC && ofs_store_reclaim(s))
			w = kvb_obj_write(&s->kvb, o->obj, object_zeros, n, off);
		if (w < 0)
			return (int)w;
		off += (uint64_t)w;
	}
	return 0;
}

int ofs_object_fallocate(struct ofs_store *s, struct ofs_object *o, int mode, uint64_t off,
			 uint64_t end)
{
	int zero = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE),
	    keep = mode & FALLOC_FL_KEEP_SIZE, ret = 0;
	struct kvb_map view;

	if (!o->obj)
		return -EBADF;
	kvb_obj_view(&s->kvb, o->obj, &view);
	if (zero)
		ret = object_zero_range(s, o, off, end < view.size ? end : view.size);
	if (!ret && end > view.size && !keep) {
		ret = ofs_object_truncate(s, o, end);
	} else if (!ret && end > view.size && !zero) {
		ret = kvb_obj_reserve(&s->kvb, o->obj, end);
		if (ret == -ENOSPC && ofs_store_reclaim(s))
			ret = kvb_obj_reserve(&s->kvb, o->obj, end);
	}
	/* Content changed: mtime and ctime, as a write's. */
	if (!ret && (zero || (end > view.size && !keep))) {
		pthread_mutex_lock(&s->lock);
		o->m.mtime = o->m.ctime = ofs_now();
		pthread_mutex_unlock(&s->lock);
	}
	return ret;
}

int ofs_object_open_writer(struct ofs_store *s, struct ofs_object *o, int trunc)
{
	pthread_rwlock_t *lk = ofs_store_rw(s, o->m.ino);
	int ret = 0;

	pthread_rwlock_wrlock(lk);
	if (!o->obj)
		ret = ofs_object_open(s, o);
	if (!ret && trunc)
		ret = kvb_obj_truncate(&s->kvb, o->obj, 0);
	if (!ret && trunc) {
		/*
		 * O_TRUNC marks mtime and ctime for update, as truncate(2) does;
		 * they are recorded with the content at the next commit, or now
		 * when there is nothing to commit (the file was empty already).
		 */
		pthread_mutex_lock(&s->lock);
		o->m.mtime = o->m.ctime = ofs_now();
		if (!kvb_obj_dirty(&s->kvb, o->obj))
			ret = meta_update(s->meta, &o->m);
		pthread_mutex_unlock(&s->lock);
	}
	if (!ret)
		o->nwriters++;
	else if (o->obj && o->nwriters == 0)
		ofs_object_close(s, o);
	pthread_rwlock_unlock(lk);
	return ret;
}

int ofs_object_update(struct ofs_store *s, struct ofs_object *o, const struct meta_inode *m)
{
	int ret = meta_update(s->meta, m);

	if (!ret)
		o->m = *m;
	return ret;
}

int ofs_object_flush(struct ofs_store *s, struct ofs_object *o, int *stale)
{
	int ret = ofs_object_commit(s, o, 0);

	*stale = 0;
	/*
	 * The last writer's close failed: its bytes are dropped, as it was
	 * told, rather than committed by a retry at release, and the caller's
	 * cache of them is stale.  Writers still open keep the state they
	 * share.  A poisoned state stays until release: this may be the close
	 * of one of several descriptors of the open file, and every later
	 * flush, fsync and the release must fail too.
	 */
	if (ret && o->werr) {
		*stale = 1;
	} else if (ret && o->nwriters == 1) {
		ofs_object_close(s, o);
		if (ofs_object_open(s, o))
			ofs_log("inode %llu: no working state after a failed close",
				(unsigned long long)o->m.ino);
		*stale = 1;
	}
	return ret;
}

void ofs_object_release_writer(struct ofs_store *s, struct ofs_object *o, int *stale)
{
	/* mmap writes can arrive after the last flush. */
	int ret = ofs_object_commit(s, o, 0);

	*stale = 0;
	if (ret)
		ofs_log("inode %llu: commit at release failed: %s; its last committed content "
			"stays", (unsigned long long)o->m.ino, strerror(-ret));
	if (ofs_writer_gone(o)) {
		ofs_object_close(s, o);
		*stale = ret != 0; /* bytes that were just dropped */
	}
}

void ofs_object_prepare_last_close(struct ofs_store *s, struct ofs_object *o)
{
	struct kvb_map map = KVB_MAP_EMPTY;

	/* A relaxed read as a hint, so other closes take no extra lock. */
	if (!kvb_has_remove_prepare(&s->kvb) ||
	    __atomic_load_n(&o->unlinked, __ATOMIC_RELAXED) != 2)
		return;
	pthread_mutex_lock(&s->lock);
	if (o->unlinked == 2 && o->nopen == 1)
		map = ofs_committed(&o->m);
	pthread_mutex_unlock(&s->lock);
	if (map.bucket >= 0)
		(void)kvb_remove_prepare(&s->kvb, &map);
}

int ofs_object_xattr_change(struct ofs_store *s, uint64_t ino, const char *name,
			    const char *value, size_t size, int flags)
{
	struct meta *meta = s->meta;
	struct ofs_object *o = ofs_object_find(s, ino);
	struct meta_inode m;
	int ret;

	/* The caller holds the object: in memory, unless its record is gone. */
	if (!o || o->unlinked == 1)
		return -ESTALE;
	ret = meta_begin(meta);
	if (ret)
		return ret;
	ret = value ? meta_xattr_set(meta, ino, name, value, size, flags)
		    : meta_xattr_remove(meta, ino, name);
	if (!ret) {
		m = o->m;
		m.ctime = ofs_now();
		ret = meta_update(meta, &m);
	}
	if (!ret)
		ret = meta_commit(meta);
	else
		meta_rollback(meta);
	if (!ret)
		o->m.ctime = m.ctime;
	return ret;
}
