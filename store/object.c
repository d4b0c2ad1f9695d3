/*
 * object.c: an object's working state: opened, written (and poisoned when
 * a write is lost), truncated, allocated, committed, closed; the barrier
 * as a writer meets it.  See object.h.
 */
#include "object.h"
#include "extent.h"

#include <assert.h>
#include <errno.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	ofs_evict_forget(s, o);
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
	if (map.bucket == META_EXTENTS)
		ret = ofs_extents_take(s, o->m.ino, &map);
	else
		ret = map.bucket >= 0 ? kvb_remove_prepare(&s->kvb, &map) : 0;
	if (!ret)
		ret = meta_delete(s->meta, o->m.ino);
	if (ret) {
		ofs_log("cannot delete unlinked inode %llu: %s (recovered at next mount)",
			(unsigned long long)o->m.ino, meta_errmsg(s->meta));
		ofs_extents_untake(s, &map);
	} else {
		ofs_store_remove(s, &map);
	}
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

int ofs_store_reclaim(struct ofs_store *s, uint64_t tenant, uint64_t bytes)
{
	uint64_t released = 0;

	/* A cache makes room: freed pages released, else the least recently used go (evict.h). */
	if (s->evict.on)
		return ofs_evict_for_put(s, tenant, bytes);
	return ofs_store_barrier(s, &released) == 0 && released > 0;
}

/*
 * ofs_store_reclaim for o growing to end bytes: its tenant and the pages
 * its committed version does not hold already (what its tenant's usage
 * grows by).
 */
static int object_reclaim(struct ofs_store *s, struct ofs_object *o, uint64_t end)
{
	uint64_t ps = s->geom.page_size, need = (end + ps - 1) / ps * ps, have, tenant = 0;
	char key[OFS_KEY_MAX + 1];
	size_t klen;

	if (s->evict.on) {
		pthread_mutex_lock(&s->lock);
		if (!o->tenant &&
		    meta_path(s->meta, o->m.ino, 0, key, sizeof(key), &klen, &o->tenant))
			o->tenant = 0; /* unlinked: no tenant */
		/* A file at the top level is its own first component: no tenant. */
		tenant = o->tenant != o->m.ino ? o->tenant : 0;
		have = o->m.npages * ps;
		pthread_mutex_unlock(&s->lock);
		need = need > have ? need - have : 0;
	}
	return ofs_store_reclaim(s, tenant, need);
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
	o->werr = 0;
	if (o->m.bucket == META_EXTENTS)
		return ofs_extents_open(s, o, key, klen);
	ret = kvb_obj_open(&s->kvb, &c, key, klen, &obj);
	if (ret)
		return ret;
	pthread_mutex_lock(&s->lock);
	o->obj = obj;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void ofs_object_close(struct ofs_store *s, struct ofs_object *o)
{
	struct kvb_obj *obj = o->obj;

	ofs_extents_close(s, o);
	pthread_mutex_lock(&s->lock);
	o->obj = NULL;
	pthread_mutex_unlock(&s->lock);
	o->werr = 0;
	kvb_obj_close(&s->kvb, obj);
}

/* Whether o's working state differs from its committed version. */
static int object_dirty(struct ofs_store *s, struct ofs_object *o)
{
	return o->x ? ofs_extents_dirty(s, o) : kvb_obj_dirty(&s->kvb, o->obj);
}

int ofs_object_commit(struct ofs_store *s, struct ofs_object *o, int sync)
{
	int ret;

	if (o->obj && o->werr) {
		OFS_COUNT(s->metrics.commit_failures, 1);
		return o->werr;
	}
	if (!o->obj || (!object_dirty(s, o) && o->m.state == META_COMMITTED))
		return sync ? ofs_store_barrier(s, NULL) : 0;
	ret = o->x ? ofs_extents_commit(s, o) : -EAGAIN;
	if (ret == -EAGAIN)
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

/*
 * Eviction off and a tenant with a quota: may o's run grow to hold end
 * bytes?  The growth is charged in whole pages past those the working run
 * holds, so a write, a truncate and a fallocate into room already taken
 * (a KEEP_SIZE reservation) cost nothing more.  0 or -EDQUOT.
 */
static int object_quota(struct ofs_store *s, struct ofs_object *o, uint64_t end)
{
	uint64_t ps = s->geom.page_size, need = (end + ps - 1) / ps * ps, have;
	struct kvb_map view;

	if (s->evict.on)
		return 0;
	if (o->x) {
		uint64_t size, npages;

		ofs_extents_view(s, o, &size, &npages);
		have = npages * ps;
		return need > have ? ofs_evict_quota_write(s, o, need - have) : 0;
	}
	kvb_obj_view(&s->kvb, o->obj, &view);
	have = view.bucket >= 0 ? view.npages * ps : 0;
	return need > have ? ofs_evict_quota_write(s, o, need - have) : 0;
}

/*
 * Before o's working state grows to end bytes: past the store's capacity
 * is EFBIG; past one extent, a file of one run becomes one of extents.
 */
static int object_grow(struct ofs_store *s, struct ofs_object *o, uint64_t end)
{
	if (end > s->geom.bucket_size * s->geom.bucket_count)
		return -EFBIG;
	if (end > s->esize && !o->x)
		return ofs_extents_convert(s, o);
	return 0;
}

/* A write's bytes: in memory (buf), or at from_off of another object's version (a copy). */
struct object_bytes {
	const void *buf;
	const struct kvb_map *from;
	uint64_t from_off;
};

static ssize_t object_put_once(struct ofs_store *s, struct ofs_object *o,
			       const struct object_bytes *d, size_t size, uint64_t off)
{
	if (o->x)
		return d->buf ? ofs_extents_write(s, o, d->buf, size, off) : -EOPNOTSUPP;
	if (d->buf)
		return kvb_obj_write(&s->kvb, o->obj, d->buf, size, off);
	return kvb_obj_copy(&s->kvb, o->obj, d->from, d->from_off, size, off);
}

/*
 * A write or a backend's copy into o's working state.  -EOPNOTSUPP from a
 * backend that cannot copy changed nothing: no poison, the caller copies
 * through memory.
 */
static ssize_t object_put(struct ofs_store *s, struct ofs_object *o, const struct object_bytes *d,
			  size_t size, uint64_t off)
{
	ssize_t n;
	int low = 0;

	if (!o->obj)
		n = -EBADF;
	else if (o->werr)
		n = o->werr;
	else if ((low = ofs_store_meta_low(s)))
		n = -ENOSPC; /* its commit could not be recorded */
	else if ((n = object_grow(s, o, off + size)) != 0)
		; /* past the store's capacity, or no memory for its extents */
	else if ((n = object_quota(s, o, off + size)) == 0)
		n = object_put_once(s, o, d, size, off);
	if (n == -ENOSPC && o->obj && !o->werr && !low && object_reclaim(s, o, off + size))
		n = object_put_once(s, o, d, size, off);
	if (n < 0 && o->obj && !o->werr && !(n == -EOPNOTSUPP && !d->buf))
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

ssize_t ofs_object_write(struct ofs_store *s, struct ofs_object *o, const void *buf, size_t size,
			 uint64_t off)
{
	struct object_bytes d = { .buf = buf };

	return object_put(s, o, &d, size, off);
}

/* Bytes a copy moves through memory at a time. */
#define OBJECT_COPY_CHUNK (1u << 20)

/*
 * The copy through memory: each chunk read as a reader reads it (checked
 * when the store verifies), then written.  A failed read ends the copy
 * short and leaves the destination as it is; a failed write poisons it
 * as any write's.
 */
static ssize_t object_copy_bounce(struct ofs_store *s, struct ofs_object *src, uint64_t off_in,
				  struct ofs_object *dst, uint64_t off_out, size_t len)
{
	size_t done = 0, cap = len < OBJECT_COPY_CHUNK ? len : OBJECT_COPY_CHUNK;
	char *buf = malloc(cap);
	ssize_t ret = 0;

	if (!buf)
		return -ENOMEM;
	while (done < len) {
		size_t want = len - done < cap ? len - done : cap;
		struct kvb_map map;
		struct ofs_bytes b;
		ssize_t n = ofs_object_pread(s, src, want, off_in + done, 0, &b, &map);

		if (n > 0 && b.fd >= 0) {
			ssize_t r = pread(b.fd, buf, (size_t)n, b.pos);

			n = r < 0 ? -errno : r;
		} else if (n > 0) {
			memcpy(buf, b.ptr, (size_t)n);
		}
		ofs_bytes_release(s, &b);
		if (n <= 0) {
			ret = n;
			break;
		}
		n = ofs_object_write(s, dst, buf, (size_t)n, off_out + done);
		if (n <= 0) {
			ret = n;
			break;
		}
		done += (size_t)n;
	}
	free(buf);
	return done > 0 ? (ssize_t)done : ret;
}

ssize_t ofs_object_copy(struct ofs_store *s, struct ofs_object *src, uint64_t off_in,
			struct ofs_object *dst, uint64_t off_out, size_t len)
{
	struct object_bytes d = { .from_off = off_in };
	struct kvb_map map;
	ssize_t n;

	if (!dst->obj)
		return -EBADF;
	if (dst->werr)
		return dst->werr;
	/* The source as a read sees it now: its working state while writers have it. */
	if (src->x && src->obj)
		map.size = src->x->wsize;
	else if (src->obj)
		kvb_obj_view(&s->kvb, src->obj, &map);
	else
		map = ofs_committed(&src->m);
	if (off_in >= map.size || len == 0)
		return 0;
	if (len > map.size - off_in)
		len = (size_t)(map.size - off_in);
	if (off_out + len < off_out || off_out + len > (uint64_t)INT64_MAX)
		return -EFBIG;
	/* As copy_file_range(2): one file's ranges may not overlap. */
	if (src == dst && off_out < off_in + len && off_in < off_out + len)
		return -EINVAL;
	/*
	 * Inside the backend when the bytes need no check on the way: a
	 * working state is never verified, a committed version is when the
	 * store verifies reads (then the copy reads them as a reader would).
	 * A file's copy within itself moves its own working run under it.
	 */
	if (src != dst && (src->obj || !s->verify) && !ofs_is_extents(src) &&
	    !ofs_is_extents(dst) && off_out + len <= s->esize) {
		n = src->obj ? kvb_obj_settle(&s->kvb, src->obj, off_in, len) : 0;
		if (n == 0) {
			d.from = &map;
			n = object_put(s, dst, &d, len, off_out);
		}
		if (n > 0)
			OFS_COUNT(s->metrics.copies_backend, 1);
		if (n != -EOPNOTSUPP)
			return n;
	}
	n = object_copy_bounce(s, src, off_in, dst, off_out, len);
	if (n > 0)
		OFS_COUNT(s->metrics.copies_memory, 1);
	return n;
}

int ofs_object_truncate(struct ofs_store *s, struct ofs_object *o, uint64_t size)
{
	int ret = object_grow(s, o, size);

	if (ret)
		return ret;
	if (o->x)
		return ofs_extents_truncate(s, o, size); /* growth is a hole: no room taken */
	ret = object_quota(s, o, size);

	if (!ret)
		ret = kvb_obj_truncate(&s->kvb, o->obj, size);
	if (ret == -ENOSPC && object_reclaim(s, o, size))
		ret = kvb_obj_truncate(&s->kvb, o->obj, size);
	return ret;
}

/* Zeros for punched and zeroed ranges (never written: it stays in .bss). */
static char object_zeros[1u << 20];

static ssize_t object_write_raw(struct ofs_store *s, struct ofs_object *o, const void *buf,
				size_t n, uint64_t off)
{
	return o->x ? ofs_extents_write(s, o, buf, n, off) : kvb_obj_write(&s->kvb, o->obj, buf, n, off);
}

/* Write zeros over [off, end) of the working state. */
static int object_zero_range(struct ofs_store *s, struct ofs_object *o, uint64_t off,
			     uint64_t end)
{
	while (off < end) {
		size_t n = end - off < sizeof(object_zeros) ? (size_t)(end - off)
							     : sizeof(object_zeros);
		ssize_t w = object_write_raw(s, o, object_zeros, n, off);

		if (w == -ENOSPC && object_reclaim(s, o, off + n))
			w = object_write_raw(s, o, object_zeros, n, off);
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
	    keep = mode & FALLOC_FL_KEEP_SIZE, ret = 0, punched = 0;
	struct kvb_map view;

	if (!o->obj)
		return -EBADF;
	if ((ret = object_grow(s, o, end)))
		return ret;
	if (o->x) {
		uint64_t npages;

		ofs_extents_view(s, o, &view.size, &npages);
		if (!zero) {
			ret = ofs_extents_reserve(s, o, off, end, keep);
			if (ret == -ENOSPC && object_reclaim(s, o, end))
				ret = ofs_extents_reserve(s, o, off, end, keep);
		} else if (end > view.size && !keep) {
			ret = ofs_extents_truncate(s, o, end);
		}
		/* Whole extents in a punched hole become holes: their pages go. */
		if (!ret && (mode & FALLOC_FL_PUNCH_HOLE)) {
			uint64_t lim = end < view.size ? end : view.size;

			ret = ofs_extents_punch(s, o, off, lim);
			if (!ret) {
				uint64_t a = (off + s->esize - 1) / s->esize * s->esize,
					 b = lim / s->esize * s->esize;

				if (a < b) {
					ret = object_zero_range(s, o, off, a);
					if (!ret)
						ret = object_zero_range(s, o, b, lim);
					punched = 1;
				}
			}
		}
		goto zeros;
	}
	kvb_obj_view(&s->kvb, o->obj, &view);
	/*
	 * The growth first: refused (EDQUOT, ENOSPC), it changed nothing, and
	 * neither has the fallocate.  Its new bytes are zeros already.
	 */
	if (end > view.size && !keep) {
		ret = ofs_object_truncate(s, o, end);
	} else if (end > view.size && !zero) {
		/* Charged only where a reserve takes room. */
		ret = kvb_has_reserve(&s->kvb) ? object_quota(s, o, end) : 0;
		if (!ret)
			ret = kvb_obj_reserve(&s->kvb, o->obj, end);
		if (ret == -ENOSPC && object_reclaim(s, o, end))
			ret = kvb_obj_reserve(&s->kvb, o->obj, end);
	}
zeros:
	if (!ret && zero && !punched)
		ret = object_zero_range(s, o, off, end < view.size ? end : view.size);
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
		ret = o->x ? ofs_extents_truncate(s, o, 0) : kvb_obj_truncate(&s->kvb, o->obj, 0);
	if (!ret && trunc) {
		/*
		 * O_TRUNC marks mtime and ctime for update, as truncate(2) does;
		 * they are recorded with the content at the next commit, or now
		 * when there is nothing to commit (the file was empty already).
		 */
		pthread_mutex_lock(&s->lock);
		o->m.mtime = o->m.ctime = ofs_now();
		if (!object_dirty(s, o))
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

	if (!ret && m->atime != o->m.atime)
		o->atime_set_round = s->evict.round + 1;
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
