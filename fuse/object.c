/*
 * object.c: a writer's working state: opened, written (and poisoned when a
 * write is lost), truncated, committed, closed; the durability barrier.
 * Under the inode's rw lock (write); ofs.lock is taken inside it, never
 * the other way round.
 */
#include "ofs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ofs_obj_open(struct ofs *ofs, struct ofs_inode *in)
{
	struct kvb_map c = ofs_committed(&in->m);
	char key[OFS_KEY_MAX];
	size_t klen = 0;
	struct kvb_obj *obj;
	int ret;

	/* The path with its tenant: a KV backend names values by all of it. */
	pthread_mutex_lock(&ofs->lock);
	ret = meta_path(ofs->store.meta, in->ino, 1, key, OFS_KEY_MAX, &klen, NULL);
	pthread_mutex_unlock(&ofs->lock);
	if (ret == -ENOENT)
		klen = 0;
	else if (ret)
		return ret;
	ret = kvb_obj_open(&ofs->store.kvb, &c, key, klen, &obj);
	if (ret)
		return ret;
	pthread_mutex_lock(&ofs->lock);
	in->obj = obj;
	pthread_mutex_unlock(&ofs->lock);
	in->werr = 0;
	return 0;
}

void ofs_obj_close(struct ofs *ofs, struct ofs_inode *in)
{
	struct kvb_obj *obj = in->obj;

	pthread_mutex_lock(&ofs->lock);
	in->obj = NULL;
	pthread_mutex_unlock(&ofs->lock);
	in->werr = 0;
	kvb_obj_close(&ofs->store.kvb, obj);
}

/* The durability barrier (store/sync.c), under our metadata lock. */
int ofs_durable(struct ofs *ofs, uint64_t *released)
{
	int ret = ofs_store_sync(&ofs->store, &ofs->lock, released);

	OFS_COUNT(ofs->metrics.barriers, 1);
	if (ret)
		ofs_log("sync failed: %s", strerror(-ret));
	return ret;
}

/*
 * ENOSPC may only mean that freed pages wait for the next barrier: run it
 * and say whether a retry can succeed.
 */
int ofs_reclaim(struct ofs *ofs)
{
	uint64_t released = 0;

	return ofs_durable(ofs, &released) == 0 && released > 0;
}

/*
 * Commit the working state: data, checksums, then the metadata record,
 * then the old pages freed (at the next barrier).  With sync, run the
 * barrier too: everything committed so far survives a power cut.
 */
int ofs_commit(struct ofs *ofs, struct ofs_inode *in, int sync)
{
	int ret;

	if (in->obj && in->werr) {
		OFS_COUNT(ofs->metrics.commit_failures, 1);
		return in->werr;
	}
	if (!in->obj || (!kvb_obj_dirty(&ofs->store.kvb, in->obj) &&
			 in->m.state == META_COMMITTED))
		return sync ? ofs_durable(ofs, NULL) : 0;
	ret = ofs_store_commit(&ofs->store, &ofs->lock, &in->m, in->obj);
	if (ret) {
		OFS_COUNT(ofs->metrics.commit_failures, 1);
		ofs_log("commit of inode %llu failed: %s", (unsigned long long)in->ino,
			strerror(-ret));
		return ret;
	}
	OFS_COUNT(ofs->metrics.objects_committed, 1);
	if (ofs->dram_capacity)
		ofs_dram_drop(&ofs->dram, in->ino);
	pthread_mutex_lock(&ofs->lock);
	free(in->pcs);
	in->pcs = NULL;
	pthread_mutex_unlock(&ofs->lock);
	return sync ? ofs_durable(ofs, NULL) : 0;
}

int ofs_setattr_size(struct ofs *ofs, struct ofs_inode *in, uint64_t size, int from_fd)
{
	int temporary = !in->obj, ret;

	if (S_ISDIR(in->m.mode))
		return -EISDIR;
	if (temporary) {
		/* Held like an open file: a concurrent unlink must detach, not free. */
		pthread_mutex_lock(&ofs->lock);
		ret = in->unlinked == 1 ? -ENOENT : 0;
		if (!ret)
			in->nopen++;
		pthread_mutex_unlock(&ofs->lock);
		if (ret)
			return ret;
		ret = ofs_obj_open(ofs, in);
		if (ret)
			goto out;
	}
	ret = kvb_obj_truncate(&ofs->store.kvb, in->obj, size);
	if (ret == -ENOSPC && ofs_reclaim(ofs))
		ret = kvb_obj_truncate(&ofs->store.kvb, in->obj, size);
	/* truncate(2) by path holds once it returns; ftruncate joins its writer's commit. */
	if (!ret && (!from_fd || temporary))
		ret = ofs_commit(ofs, in, 0);
	if (temporary)
		ofs_obj_close(ofs, in);
out:
	if (temporary) {
		pthread_mutex_lock(&ofs->lock);
		in->nopen--;
		ofs_isettle(ofs, in);
		pthread_mutex_unlock(&ofs->lock);
	}
	return ret;
}

int ofs_open_writer(struct ofs *ofs, struct ofs_inode *in, int trunc)
{
	int ret = 0;

	pthread_rwlock_wrlock(ofs_rw(ofs, in));
	if (!in->obj)
		ret = ofs_obj_open(ofs, in);
	if (!ret && trunc)
		ret = kvb_obj_truncate(&ofs->store.kvb, in->obj, 0);
	if (!ret && trunc) {
		/*
		 * O_TRUNC marks mtime and ctime for update, as truncate(2) does;
		 * they are recorded with the content at the next commit, or now
		 * when there is nothing to commit (the file was empty already).
		 */
		pthread_mutex_lock(&ofs->lock);
		in->m.mtime = in->m.ctime = ofs_now();
		if (!kvb_obj_dirty(&ofs->store.kvb, in->obj))
			ret = meta_update(ofs->store.meta, &in->m);
		pthread_mutex_unlock(&ofs->lock);
	}
	if (!ret)
		in->nwriters++;
	else if (in->obj && in->nwriters == 0)
		ofs_obj_close(ofs, in);
	pthread_rwlock_unlock(ofs_rw(ofs, in));
	return ret;
}

/*
 * A WRITE into in's working state failed.  The writer may be the kernel
 * writing back pages it already acknowledged (mmap, cached writes), whose
 * bytes are now lost: the working state is poisoned, so that no later
 * flush, fsync or release commits it with zeros or old bytes in their
 * place.  Under the inode's rw lock (write).
 */
void ofs_poison(struct ofs *ofs, struct ofs_inode *in, int err, uint64_t off, size_t len)
{
	char key[OFS_KEY_MAX];
	size_t klen = 0;

	in->werr = err;
	pthread_mutex_lock(&ofs->lock);
	if (meta_path(ofs->store.meta, in->ino, 1, key, sizeof(key) - 1, &klen, NULL))
		klen = 0;
	pthread_mutex_unlock(&ofs->lock);
	key[klen] = '\0';
	ofs_log("write of %zu bytes at %llu to '%s' (inode %llu) failed: %s; the file keeps its "
		"last committed content, and its writers' flush, fsync and close fail",
		len, (unsigned long long)off, klen ? key : "(unlinked)",
		(unsigned long long)in->ino, strerror(-err));
}

/* Zeros for punched and zeroed ranges (never written: it stays in .bss). */
static char ofs_zeros[1u << 20];

/* Write zeros over [off, end) of the working state.  Under in's rw lock. */
int ofs_zero_range(struct ofs *ofs, struct ofs_inode *in, uint64_t off, uint64_t end)
{
	while (off < end) {
		size_t n = end - off < sizeof(ofs_zeros) ? (size_t)(end - off) : sizeof(ofs_zeros);
		ssize_t w = kvb_obj_write(&ofs->store.kvb, in->obj, ofs_zeros, n, off);

		if (w == -ENOSPC && ofs_reclaim(ofs))
			w = kvb_obj_write(&ofs->store.kvb, in->obj, ofs_zeros, n, off);
		if (w < 0)
			return (int)w;
		off += (uint64_t)w;
	}
	return 0;
}
