/*
 * read.c: reads as the kernel meets them: the store's read strategy
 * (store/read.c), a file dropped when the backend has lost its value, the
 * bytes as a buffer vector for a reply, and the prefill of the kernel's
 * page cache at open.
 */
#include "ofs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * The backend no longer has the value of in's committed version map (a KV
 * store evicts and loses values by itself): a cache miss, not corruption.
 * The file goes as an unlink would take it (detached while open), the
 * kernel is told to forget the name, and a line and a counter say so.
 * Under in's stripe lock (read) or none; takes store.lock.
 */
static void ofs_value_missing(struct ofs *ofs, struct ofs_inode *in, const struct kvb_map *map)
{
	char name[META_NAME_MAX + 1], key[OFS_KEY_MAX + 1];
	struct kvb_map cur;
	uint64_t parent = 0;
	size_t len = 0, klen = 0;
	int ret;

	pthread_mutex_lock(&ofs->store.lock);
	cur = ofs_committed(&in->o.m);
	/* Only the version that was read, and only once: a later commit replaced it. */
	if (in->o.unlinked || cur.bucket != map->bucket || cur.page != map->page ||
	    meta_name(ofs->store.meta, in->o.m.ino, &parent, name, &len)) {
		pthread_mutex_unlock(&ofs->store.lock);
		return;
	}
	if (meta_path(ofs->store.meta, in->o.m.ino, 1, key, OFS_KEY_MAX, &klen, NULL))
		klen = 0;
	ret = ofs_ns_drop(&ofs->store, &in->o.m);
	pthread_mutex_unlock(&ofs->store.lock);
	if (ret) {
		ofs_log("'%.*s' (inode %llu): the backend has lost its value, and dropping the file "
			"failed: %s", (int)klen, key, (unsigned long long)in->o.m.ino, strerror(-ret));
		return;
	}
	OFS_COUNT(ofs->store.metrics.values_missing, 1);
	ofs_log("'%.*s' (inode %llu, %llu bytes): the backend no longer has its value (a cache "
		"miss); the file is dropped", (int)klen, key, (unsigned long long)in->o.m.ino,
		(unsigned long long)map->size);
	ofs_queue_inval_entry(ofs, parent, name, len);
}

/*
 * ofs_object_read, and a value the backend has lost drops its file
 * (ofs_value_missing) before -ENOENT is returned.  Under in's stripe lock
 * (read); b is released by the caller.
 */
static ssize_t ofs_fetch(struct ofs *ofs, struct ofs_inode *in, const struct kvb_map *map,
		  size_t size, uint64_t off, int quiet, struct ofs_bytes *b)
{
	ssize_t n = ofs_object_read(&ofs->store, &in->o, map, size, off, quiet, b);

	if (n == -ENOENT)
		ofs_value_missing(ofs, in, map);
	return n;
}

ssize_t ofs_read(struct ofs *ofs, struct ofs_inode *in, size_t size, uint64_t off, int uncached,
		 struct ofs_bytes *b)
{
	struct kvb_map map;
	ssize_t n = ofs_object_pread(&ofs->store, &in->o, size, off, uncached, b, &map);

	if (n == -ENOENT)
		ofs_value_missing(ofs, in, &map);
	return n;
}

/* The bytes as a buffer vector, for a reply or a store into the kernel's cache. */
struct fuse_bufvec ofs_bytes_vec(const struct ofs_bytes *b, size_t n)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(n);

	if (b->fd >= 0) {
		bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		bv.buf[0].fd = b->fd;
		bv.buf[0].pos = b->pos;
	} else {
		bv.buf[0].mem = (void *)b->ptr;
	}
	return bv;
}

/*
 * Put a committed object whole into the kernel's page cache at the first
 * open after the kernel looked it up, so that reading it takes no round
 * trip (a KV block is read whole) and leaves the cached attributes valid
 * (a read the daemon serves makes the kernel refetch atime at the next
 * stat).  Only then is it safe to store: the kernel caches none of the
 * inode's pages yet.  A writer's open takes the stripe lock exclusively,
 * so it waits while we hold it shared and its bytes land over ours, never
 * under.  Other opens wait for this one (kfresh 2), so no read of the
 * inode holds its pages locked, waiting for a daemon thread, while the
 * store waits for those pages.  On any failure the reads come to us.
 */
int ofs_prefill(struct ofs *ofs, struct ofs_inode *in)
{
	pthread_rwlock_t *lk = ofs_rw(ofs, in);
	struct kvb_map map;
	struct ofs_bytes b;
	ssize_t n = 0;
	int stored = 0;

	pthread_rwlock_rdlock(lk);
	map = ofs_committed(&in->o.m);
	if (ofs->se && !in->o.obj && in->o.m.state == META_COMMITTED && map.bucket >= 0 &&
	    map.size > 0 && map.size <= ofs->prefill_max) {
		n = ofs_fetch(ofs, in, &map, (size_t)map.size, 0, 1, &b);
		if (n == (ssize_t)map.size) {
			struct fuse_bufvec bv = ofs_bytes_vec(&b, (size_t)n);

			/* Memory goes by writev: one copy, as a reply's would. */
			if (fuse_lowlevel_notify_store(ofs->se, in->o.m.ino, 0, &bv,
						       b.fd >= 0 ? 0 : FUSE_BUF_NO_SPLICE) == 0) {
				OFS_COUNT(ofs->store.metrics.prefills, 1);
				OFS_COUNT(ofs->store.metrics.bytes_read, (size_t)n);
				stored = 1;
			}
		}
		ofs_bytes_release(&ofs->store, &b);
	}
	pthread_rwlock_unlock(lk);
	return n == -ENOENT ? -ENOENT : stored;
}
