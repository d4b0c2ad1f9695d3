/*
 * read.c: the read strategy.  The bytes of a committed version come from
 * the DRAM tier, the backend's own buffer (zero copy), a copy checked
 * page by page (verify), a bucket file range spliced into the reply, or a
 * plain copy, in that order of preference; a value the backend lost drops
 * its file.  Also the prefill of the kernel's page cache at open.
 */
#include "ofs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The committed version's per-page checksums, loaded once per inode. */
static int ofs_load_pcs(struct ofs *ofs, struct ofs_inode *in)
{
	uint64_t *pcs;
	int ret = 0;

	pthread_mutex_lock(&ofs->lock);
	if (!in->pcs) {
		pcs = malloc(in->m.npages * sizeof(*pcs));
		ret = pcs ? meta_pcsums_get(ofs->store.meta, in->ino, pcs, in->m.npages) : -ENOMEM;
		if (ret)
			free(pcs);
		else
			in->pcs = pcs;
	}
	pthread_mutex_unlock(&ofs->lock);
	return ret;
}

/* A page that failed its checksum: counted and logged with its key and place. */
static void ofs_log_bad_page(struct ofs *ofs, struct ofs_inode *in, const struct kvb_map *map,
			     uint64_t bad)
{
	char key[OFS_KEY_MAX + 1];
	size_t klen = 0;

	pthread_mutex_lock(&ofs->lock);
	OFS_COUNT(ofs->metrics.checksum_failures, 1);
	if (ofs_key(ofs, in->ino, key, &klen))
		klen = 0;
	pthread_mutex_unlock(&ofs->lock);
	key[klen] = '\0';
	ofs_log("checksum mismatch: inode %llu key '%s' bucket %d page %llu (bucket offset "
		"%llu): returning EIO",
		(unsigned long long)in->ino, key, map->bucket,
		(unsigned long long)(map->page + bad),
		(unsigned long long)((map->page + bad) * ofs->store.geom.page_size));
}

void ofs_bytes_release(struct ofs *ofs, struct ofs_bytes *b)
{
	if (b->ref)
		kvb_read_unref(&ofs->store.kvb, b->ref);
	free(b->own);
}

/* The DRAM tier's copy, when it has this version: the count, or -ENOENT on a miss. */
static ssize_t ofs_fetch_dram(struct ofs *ofs, struct ofs_inode *in, size_t size, uint64_t off,
			      struct ofs_bytes *b)
{
	struct ofs_dram_version v;
	ssize_t n = -ENOENT;

	ofs_version(&in->m, &v);
	b->own = malloc(size ? size : 1);
	if (b->own)
		n = ofs_dram_read(&ofs->dram, in->ino, &v, b->own, size, off);
	if (n < 0) {
		free(b->own);
		b->own = NULL;
		OFS_COUNT(ofs->metrics.dram_misses, 1);
		return -ENOENT;
	}
	OFS_COUNT(ofs->metrics.dram_hits, 1);
	b->ptr = b->own;
	return n;
}

/*
 * The backend no longer has the value of in's committed version map (a KV
 * store evicts and loses values by itself): a cache miss, not corruption.
 * The file goes as an unlink would take it (detached while open), the
 * kernel is told to forget the name, and a line and a counter say so.
 * Under in's stripe lock (read) or none; takes ofs.lock.
 */
static void ofs_value_missing(struct ofs *ofs, struct ofs_inode *in, const struct kvb_map *map)
{
	char name[META_NAME_MAX + 1], key[OFS_KEY_MAX + 1];
	struct kvb_map to_free = KVB_MAP_EMPTY, cur;
	uint64_t parent = 0;
	size_t len = 0, klen = 0;
	int ret;

	pthread_mutex_lock(&ofs->lock);
	cur = ofs_committed(&in->m);
	/* Only the version that was read, and only once: a later commit replaced it. */
	if (in->unlinked || cur.bucket != map->bucket || cur.page != map->page ||
	    meta_name(ofs->store.meta, in->ino, &parent, name, &len)) {
		pthread_mutex_unlock(&ofs->lock);
		return;
	}
	if (meta_path(ofs->store.meta, in->ino, 1, key, OFS_KEY_MAX, &klen, NULL))
		klen = 0;
	ret = ofs_drop_name(ofs, &in->m, &to_free);
	if (!ret && to_free.bucket >= 0)
		kvb_remove(&ofs->store.kvb, &to_free);
	pthread_mutex_unlock(&ofs->lock);
	if (ret) {
		ofs_log("'%.*s' (inode %llu): the backend has lost its value, and dropping the file "
			"failed: %s", (int)klen, key, (unsigned long long)in->ino, strerror(-ret));
		return;
	}
	OFS_COUNT(ofs->metrics.values_missing, 1);
	ofs_log("'%.*s' (inode %llu, %llu bytes): the backend no longer has its value (a cache "
		"miss); the file is dropped", (int)klen, key, (unsigned long long)in->ino,
		(unsigned long long)map->size);
	ofs_queue_inval_entry(ofs, parent, name, len);
}

/*
 * Fetch size bytes at off of in's version map (size already cut to the end
 * of the file): from the DRAM tier, the backend's buffer, a copy checked
 * page by page when verify is on, or the bucket file.  The count, or
 * -errno; a page that fails its checksum is EIO, never wrong bytes, and is
 * logged and counted unless quiet (a prefill: the read that follows it
 * reports it).  -ENOENT: the backend has lost the value, and the file is
 * dropped (ofs_value_missing).  Under in's stripe lock (read); b is
 * released by the caller.
 */
ssize_t ofs_fetch(struct ofs *ofs, struct ofs_inode *in, const struct kvb_map *map,
			 size_t size, uint64_t off, int quiet, struct ofs_bytes *b)
{
	struct kvb *kvb = &ofs->store.kvb;
	uint64_t bad = 0;
	ssize_t n;

	memset(b, 0, sizeof(*b));
	b->fd = -1;
	if (ofs->dram_capacity && !in->obj && (n = ofs_fetch_dram(ofs, in, size, off, b)) >= 0)
		return n;
	if (!in->obj && map->bucket >= 0 && (!ofs->verify || ofs_load_pcs(ofs, in) == 0)) {
		n = kvb_read_ref(kvb, map, ofs->verify ? in->pcs : NULL, size, off, &b->ptr, &b->ref,
				 &bad);
		if (n != -EOPNOTSUPP)
			goto checked;
	}
	if (ofs->verify && !in->obj && map->bucket >= 0 && ofs_load_pcs(ofs, in) == 0) {
		b->own = malloc(size ? size : 1);
		n = b->own ? kvb_read_verified(kvb, map, in->pcs, b->own, size, off, &bad) : -ENOMEM;
		b->ptr = b->own;
		goto checked;
	}
	if (kvb_read_fd(kvb, map, off, size, &b->fd, &b->pos) == 0)
		return (ssize_t)size; /* straight from the bucket file: no copy through our memory */
	b->fd = -1;
	b->own = malloc(size ? size : 1);
	b->ptr = b->own;
	n = b->own ? kvb_read(kvb, map, b->own, size, off) : -ENOMEM;
checked:
	if (n == -EBADMSG) {
		if (!quiet)
			ofs_log_bad_page(ofs, in, map, bad);
		n = -EIO;
	}
	if (n == -ENOENT)
		ofs_value_missing(ofs, in, map);
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

	pthread_rwlock_rdlock(lk);
	map = ofs_committed(&in->m);
	if (ofs->se && !in->obj && in->m.state == META_COMMITTED && map.bucket >= 0 &&
	    map.size > 0 && map.size <= ofs->prefill_max) {
		n = ofs_fetch(ofs, in, &map, (size_t)map.size, 0, 1, &b);
		if (n == (ssize_t)map.size) {
			struct fuse_bufvec bv = ofs_bytes_vec(&b, (size_t)n);

			/* Memory goes by writev: one copy, as a reply's would. */
			if (fuse_lowlevel_notify_store(ofs->se, in->ino, 0, &bv,
						       b.fd >= 0 ? 0 : FUSE_BUF_NO_SPLICE) == 0) {
				OFS_COUNT(ofs->metrics.prefills, 1);
				OFS_COUNT(ofs->metrics.bytes_read, (size_t)n);
			}
		}
		ofs_bytes_release(ofs, &b);
	}
	pthread_rwlock_unlock(lk);
	return n == -ENOENT ? -ENOENT : 0;
}
