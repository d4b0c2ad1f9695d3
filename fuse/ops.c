/*
 * ops.c: the FUSE low-level operations.
 *
 * Each op does its work in helpers that return 0 or a negative errno and
 * sends exactly one reply at the end.  Nothing may touch an inode after its
 * reply: the kernel can then release and forget it, and another thread free
 * it.  Lock order: an inode's rw lock, then
 * ofs.lock; never the other way round.
 */
#include "ofs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <sys/xattr.h>

#include <xxhash.h>

/* ino is there for the ops' shape; some bodies only use the inode struct. */
#define OFS_UNUSED __attribute__((unused))

#define DESCRIPTOR_XATTR "user.offload.descriptor"
#define CHECKSUM_XATTR "user.offload.checksum"
#define PROMOTE_XATTR "user.offload.promote"
#define METRICS_XATTR "user.offload.metrics"
/* Names under it are ours; every other user.* name is kept for its owner (meta). */
#define OURS_XATTR_PREFIX "user.offload."

static struct ofs *ofs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static int ofs_syslog;

void ofs_log_to_syslog(int on)
{
	ofs_syslog = on;
	if (on)
		openlog("offloadfs", LOG_PID, LOG_DAEMON);
}

void ofs_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (!ofs_syslog) {
		fputs("offloadfs: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	} else {
		vsyslog(LOG_NOTICE, fmt, ap);
	}
	va_end(ap);
}

static int64_t ofs_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct kvb_map ofs_committed(const struct meta_inode *m)
{
	struct kvb_map map = { .bucket = m->bucket, .page = m->page, .npages = m->npages,
			       .size = m->size };
	return map;
}

/* ---- the inode table (under ofs.lock) ---- */

static size_t ofs_slot(const struct ofs *ofs, uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ULL) >> 20) & (ofs->tabsize - 1);
}

static struct ofs_inode *ofs_ifind(struct ofs *ofs, uint64_t ino)
{
	struct ofs_inode *in;

	for (in = ofs->tab[ofs_slot(ofs, ino)]; in; in = in->next)
		if (in->ino == ino)
			return in;
	return NULL;
}

static int ofs_igrow(struct ofs *ofs)
{
	size_t oldsize = ofs->tabsize, i;
	struct ofs_inode **old = ofs->tab, **tab;

	tab = calloc(oldsize * 2, sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	ofs->tab = tab;
	ofs->tabsize = oldsize * 2;
	for (i = 0; i < oldsize; i++) {
		struct ofs_inode *in = old[i], *next;

		for (; in; in = next) {
			size_t s = ofs_slot(ofs, in->ino);

			next = in->next;
			in->next = tab[s];
			tab[s] = in;
		}
	}
	free(old);
	return 0;
}

/* The table's inode for m->ino, created from m when absent. */
static struct ofs_inode *ofs_iget_from(struct ofs *ofs, const struct meta_inode *m)
{
	struct ofs_inode *in = ofs_ifind(ofs, m->ino);
	size_t s;

	if (in)
		return in;
	if (ofs->tabcount >= ofs->tabsize && ofs_igrow(ofs))
		return NULL;
	in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	in->ino = m->ino;
	in->m = *m;
	s = ofs_slot(ofs, in->ino);
	in->next = ofs->tab[s];
	ofs->tab[s] = in;
	ofs->tabcount++;
	return in;
}

static void ofs_iremove(struct ofs *ofs, struct ofs_inode *in)
{
	struct ofs_inode **pp = &ofs->tab[ofs_slot(ofs, in->ino)];

	while (*pp && *pp != in)
		pp = &(*pp)->next;
	if (*pp)
		*pp = in->next;
	ofs->tabcount--;
	free(in->pcs);
	free(in);
}

int ofs_table_init(struct ofs *ofs)
{
	struct meta_inode root;
	struct ofs_inode *in;
	int i;

	for (i = 0; i < OFS_NLOCKS; i++)
		pthread_rwlock_init(&ofs->rw[i], NULL);
	ofs->tabsize = 1024;
	ofs->tab = calloc(ofs->tabsize, sizeof(*ofs->tab));
	if (!ofs->tab || meta_get(ofs->store.meta, META_ROOT_INO, &root))
		return -ENOMEM;
	in = ofs_iget_from(ofs, &root);
	if (!in)
		return -ENOMEM;
	in->nlookup = 1;
	return 0;
}

void ofs_table_release(struct ofs *ofs)
{
	size_t i;

	for (i = 0; ofs->tab && i < ofs->tabsize; i++) {
		while (ofs->tab[i]) {
			struct ofs_inode *in = ofs->tab[i];

			ofs->tab[i] = in->next;
					free(in->pcs);
			free(in);
		}
	}
	free(ofs->tab);
	ofs->tab = NULL;
}

/*
 * The inode of a request, held (busy) until ofs_iput: the kernel may release
 * and forget an inode as soon as a reply is sent, so the struct must outlive
 * the request that is using it, whatever order the requests arrive in.
 */
static struct ofs_inode *ofs_iget(struct ofs *ofs, fuse_ino_t ino)
{
	struct ofs_inode *in;

	pthread_mutex_lock(&ofs->lock);
	in = ofs_ifind(ofs, ino);
	if (in)
		in->busy++;
	pthread_mutex_unlock(&ofs->lock);
	return in;
}

/*
 * Free what an unlinked inode still holds once nothing has it open, and
 * forget it once the kernel does too.  Under ofs.lock.
 */
static void ofs_isettle(struct ofs *ofs, struct ofs_inode *in)
{
	struct ofs_store *s = &ofs->store;

	if (in->nopen == 0 && in->unlinked == 2) {
		struct kvb_map map = ofs_committed(&in->m);
		int ret = map.bucket >= 0 ? kvb_remove_prepare(&s->kvb, &map) : 0;

		if (!ret)
			ret = meta_delete(s->meta, in->ino);

		if (ret)
			ofs_log("cannot delete unlinked inode %llu: %s (recovered at next mount)",
				(unsigned long long)in->ino, meta_errmsg(s->meta));
		else if (map.bucket >= 0)
			kvb_remove(&s->kvb, &map);
		in->unlinked = 1;
	}
	if (in->nopen == 0 && in->nlookup == 0 && in->busy == 0 && in->ino != META_ROOT_INO)
		ofs_iremove(ofs, in);
}

static void ofs_iput(struct ofs *ofs, struct ofs_inode *in)
{
	if (!in)
		return;
	pthread_mutex_lock(&ofs->lock);
	in->busy--;
	ofs_isettle(ofs, in);
	pthread_mutex_unlock(&ofs->lock);
}

/* ---- attributes and entries ---- */

static void ofs_fill_stat(const struct ofs *ofs, const struct ofs_inode *in,
			  const struct meta_inode *m, struct stat *st)
{
	uint64_t size = m->size, npages = m->npages;

	if (in && in->obj) {
		struct kvb_map view;

		kvb_obj_view(&ofs->store.kvb, in->obj, &view);
		size = view.size;
		npages = view.bucket >= 0 ? view.npages : 0;
	}
	memset(st, 0, sizeof(*st));
	st->st_ino = m->ino;
	st->st_mode = m->mode;
	/* A directory's count (2 + subdirectories) is kept by the store. */
	st->st_nlink = S_ISDIR(m->mode) ? (m->nlink >= 2 ? m->nlink : 2)
					: (in && in->unlinked ? 0 : 1);
	st->st_uid = m->uid;
	st->st_gid = m->gid;
	st->st_size = (off_t)size;
	st->st_blksize = (blksize_t)ofs->store.geom.page_size;
	st->st_blocks = (blkcnt_t)(npages * ofs->store.geom.page_size / 512);
	st->st_atim.tv_sec = m->atime / 1000000000;
	st->st_atim.tv_nsec = m->atime % 1000000000;
	st->st_mtim.tv_sec = m->mtime / 1000000000;
	st->st_mtim.tv_nsec = m->mtime % 1000000000;
	st->st_ctim.tv_sec = m->ctime / 1000000000;
	st->st_ctim.tv_nsec = m->ctime % 1000000000;
}

/* Count a kernel lookup of m and fill its entry.  Under ofs.lock. */
static int ofs_entry(struct ofs *ofs, const struct meta_inode *m, struct fuse_entry_param *e)
{
	struct ofs_inode *in = ofs_iget_from(ofs, m);

	if (!in)
		return -ENOMEM;
	if (in->nlookup == 0)
		in->kfresh = 1; /* a new kernel inode: none of its pages are cached */
	in->nlookup++;
	memset(e, 0, sizeof(*e));
	e->ino = in->ino;
	e->attr_timeout = ofs->timeout;
	e->entry_timeout = ofs->timeout;
	ofs_fill_stat(ofs, in, &in->m, &e->attr);
	return 0;
}

static int ofs_check_name(const char *name)
{
	size_t len = strlen(name);

	if (len == 0)
		return -EINVAL;
	if (len > META_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * Whether a name of namelen bytes in dir keeps its key (the path below its
 * tenant) within META_KEY_MAX, with deeper bytes more below it (the path
 * of a directory's deepest descendant).  A tenant's name is no part of its
 * keys.  Under ofs.lock.
 */
static int ofs_check_key(struct ofs *ofs, uint64_t dir, size_t namelen, size_t deeper)
{
	size_t len = 0;
	int ret;

	if (dir == META_ROOT_INO)
		return 0;
	/* Names are mostly made where the last one was: its key's length is kept. */
	if (dir == ofs->klen_dir && ofs->klen_renames == ofs->dir_renames) {
		len = ofs->klen;
	} else {
		ret = meta_key_len(ofs->store.meta, dir, &len);
		if (ret)
			return ret;
		ofs->klen_dir = dir;
		ofs->klen = len;
		ofs->klen_renames = ofs->dir_renames;
	}
	if ((len ? len + 1 : 0) + namelen + (deeper ? deeper + 1 : 0) > META_KEY_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * An entry of dir was made, removed or renamed: its mtime and ctime become
 * now, in the store and in the table's copy, with the link count the store
 * keeps.  Under ofs.lock, inside the change's transaction; if that fails,
 * ofs_dir_reload.
 */
static int ofs_dir_changed(struct ofs *ofs, uint64_t dir, int64_t now)
{
	struct ofs_inode *d;
	uint32_t nlink = 0;
	int ret = meta_dir_changed(ofs->store.meta, dir, now, &nlink);

	if (!ret && (d = ofs_ifind(ofs, dir))) {
		d->m.mtime = d->m.ctime = now;
		d->m.nlink = nlink;
	}
	return ret;
}

/*
 * The table's copy of dir's times and link count as the store has them,
 * after a transaction that changed its entries failed.  Under ofs.lock.
 */
static void ofs_dir_reload(struct ofs *ofs, uint64_t dir)
{
	struct ofs_inode *d = ofs_ifind(ofs, dir);
	struct meta_inode m;

	if (d && meta_get(ofs->store.meta, dir, &m) == 0) {
		d->m.mtime = m.mtime;
		d->m.ctime = m.ctime;
		d->m.nlink = m.nlink;
	}
}

/*
 * The object key of ino: its path below its tenant directory.  Under
 * ofs.lock.  An unlinked inode has no path; it keeps the key it had.
 */
static int ofs_key(struct ofs *ofs, uint64_t ino, char *key, size_t *klen)
{
	return meta_path(ofs->store.meta, ino, 0, key, OFS_KEY_MAX, klen, NULL);
}

/* The tenant directory holding dir (dir itself for a tenant; root for root). */
static int ofs_tenant(struct ofs *ofs, uint64_t dir, uint64_t *tenant)
{
	char name[META_NAME_MAX + 1];
	uint64_t parent;
	size_t len;
	int ret;

	while (dir != META_ROOT_INO) {
		ret = meta_name(ofs->store.meta, dir, &parent, name, &len);
		if (ret)
			return ret;
		if (parent == META_ROOT_INO)
			break;
		dir = parent;
	}
	*tenant = dir;
	return 0;
}

/* ---- writers: open, commit, close (under the inode's rw lock) ---- */

static int ofs_obj_open(struct ofs *ofs, struct ofs_inode *in)
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

static void ofs_obj_close(struct ofs *ofs, struct ofs_inode *in)
{
	struct kvb_obj *obj = in->obj;

	pthread_mutex_lock(&ofs->lock);
	in->obj = NULL;
	pthread_mutex_unlock(&ofs->lock);
	in->werr = 0;
	kvb_obj_close(&ofs->store.kvb, obj);
}

/* The durability barrier (store.c), under our metadata lock. */
static int ofs_durable(struct ofs *ofs, uint64_t *released)
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
static int ofs_reclaim(struct ofs *ofs)
{
	uint64_t released = 0;

	return ofs_durable(ofs, &released) == 0 && released > 0;
}

/*
 * Commit the working state: data, checksums, then the metadata record,
 * then the old pages freed (at the next barrier).  With sync, run the
 * barrier too: everything committed so far survives a power cut.
 */
static int ofs_commit(struct ofs *ofs, struct ofs_inode *in, int sync)
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

/* Ask the group-commit thread to drop the kernel's cached pages of ino. */
static void ofs_queue_inval(struct ofs *ofs, uint64_t ino)
{
	pthread_mutex_lock(&ofs->slock);
	if (ofs->ninval < sizeof(ofs->inval) / sizeof(ofs->inval[0]))
		ofs->inval[ofs->ninval++] = ino;
	else
		ofs_log("inode %llu: invalidation queue full; cached pages may be stale until "
			"evicted", (unsigned long long)ino);
	pthread_cond_broadcast(&ofs->scond);
	pthread_mutex_unlock(&ofs->slock);
}

static void ofs_queue_inval_entry(struct ofs *ofs, uint64_t parent, const char *name, size_t len)
{
	pthread_mutex_lock(&ofs->slock);
	if (ofs->ninval_entry < OFS_INVAL_ENTRY_MAX && len <= META_NAME_MAX) {
		struct ofs_inval_entry *e = &ofs->inval_entry[ofs->ninval_entry++];

		e->parent = parent;
		e->len = len;
		memcpy(e->name, name, len);
	} else {
		ofs_log("'%.*s': invalidation queue full; the kernel may list the name until its "
			"entry times out", (int)len, name);
	}
	pthread_cond_broadcast(&ofs->scond);
	pthread_mutex_unlock(&ofs->slock);
}

static void ofs_send_invals(struct ofs *ofs)
{
	uint64_t inos[OFS_INVAL_MAX];
	struct ofs_inval_entry ents[OFS_INVAL_ENTRY_MAX];
	unsigned n, ne, i;

	pthread_mutex_lock(&ofs->slock);
	n = ofs->ninval;
	memcpy(inos, ofs->inval, n * sizeof(inos[0]));
	ofs->ninval = 0;
	ne = ofs->ninval_entry;
	memcpy(ents, ofs->inval_entry, ne * sizeof(ents[0]));
	ofs->ninval_entry = 0;
	pthread_mutex_unlock(&ofs->slock);
	for (i = 0; ofs->se && i < n; i++)
		fuse_lowlevel_notify_inval_inode(ofs->se, inos[i], 0, 0);
	for (i = 0; ofs->se && i < ne; i++)
		fuse_lowlevel_notify_inval_entry(ofs->se, ents[i].parent, ents[i].name, ents[i].len);
}

/*
 * The metadata's filesystem running short: its reserve given back and the
 * log checkpointed (every tick while short), so that deletes still commit;
 * the reserve taken again once space is back.
 */
static void ofs_watch_space(struct ofs *ofs)
{
	int did = ofs_store_space(&ofs->store, &ofs->lock, 0);

	if (did & OFS_SPACE_RELEASED)
		ofs_log("the disk holding %s is nearly full: its %llu KiB reserve given back "
			"(writes get ENOSPC; deletes free space)",
			ofs->store.meta_path, (unsigned long long)ofs->store.reserve_size >> 10);
	if (did & OFS_SPACE_ARMED)
		ofs_log("space is back on the disk holding %s: its reserve taken again",
			ofs->store.meta_path);
}

static void *ofs_syncer(void *arg)
{
	struct ofs *ofs = arg;
	uint64_t seen = 0;

	uint64_t last_metrics = 0;
	unsigned period = ofs->sync_ms ? ofs->sync_ms : 1000;

	pthread_mutex_lock(&ofs->slock);
	while (!ofs->stopping) {
		struct timespec ts;
		uint64_t changes;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += period / 1000;
		ts.tv_nsec += (long)(period % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&ofs->scond, &ofs->slock, &ts);
		if (ofs->stopping)
			break;
		pthread_mutex_unlock(&ofs->slock);
		pthread_mutex_lock(&ofs->lock);
		changes = meta_changes(ofs->store.meta);
		pthread_mutex_unlock(&ofs->lock);
		ofs_send_invals(ofs);
		/*
		 * Group commit: one barrier covers every commit, create, rename
		 * and unlink of the interval, and gives back the pages they freed.
		 */
		if (ofs->sync_ms && changes != seen) {
			seen = changes;
			ofs_durable(ofs, NULL);
		}
		ofs_watch_space(ofs);
		/* The textfile collector's file, every few seconds. */
		if (ofs->metrics_path && ofs_now_ns() - last_metrics >= 5000000000ULL) {
			int r = ofs_metrics_write(ofs, ofs->metrics_path);

			if (r && !last_metrics)
				ofs_log("cannot write metrics to %s: %s", ofs->metrics_path,
					strerror(-r));
			last_metrics = ofs_now_ns();
		}
		pthread_mutex_lock(&ofs->slock);
	}
	pthread_mutex_unlock(&ofs->slock);
	return NULL;
}

int ofs_syncer_start(struct ofs *ofs)
{
	pthread_mutex_init(&ofs->slock, NULL);
	pthread_cond_init(&ofs->scond, NULL);
	pthread_cond_init(&ofs->pcond, NULL);
	if (pthread_create(&ofs->syncer, NULL, ofs_syncer, ofs))
		return -EAGAIN;
	ofs->syncer_running = 1;
	return 0;
}

/* Tell the group-commit thread and the promotion worker to end. */
static void ofs_signal_stop(struct ofs *ofs)
{
	pthread_mutex_lock(&ofs->slock);
	ofs->stopping = 1;
	pthread_cond_broadcast(&ofs->pcond);
	pthread_cond_broadcast(&ofs->scond);
	pthread_mutex_unlock(&ofs->slock);
}

void ofs_syncer_stop(struct ofs *ofs)
{
	if (!ofs->syncer_running)
		return;
	ofs_signal_stop(ofs);
	pthread_join(ofs->syncer, NULL);
	ofs->syncer_running = 0;
	/* The last numbers, for a collector that reads after we are gone. */
	if (ofs->metrics_path)
		ofs_metrics_write(ofs, ofs->metrics_path);
}

uint64_t ofs_dram_bytes(struct ofs *ofs)
{
	return ofs->dram_capacity ? ofs_dram_used(&ofs->dram) : 0;
}

static void ofs_version(const struct meta_inode *m, struct ofs_dram_version *v)
{
	v->bucket = m->bucket;
	v->page = m->page;
	v->size = m->size;
	v->csum = m->csum;
}

/*
 * Queue a promotion of in's committed version.  Under ofs.lock.  Nothing to
 * do for an empty object, one already queued, or (but for the warm-up
 * queued at unmount) one already resident.
 */
static int ofs_queue_promotion(struct ofs *ofs, struct ofs_inode *in, const char *reason)
{
	int warmup = !strcmp(reason, "warmup");

	struct ofs_dram_version v;
	struct meta_task t;
	size_t klen = 0;
	int ret;

	if (!ofs->dram_capacity)
		return -EOPNOTSUPP;
	if (!S_ISREG(in->m.mode) || in->m.state != META_COMMITTED)
		return -EINVAL;
	ofs_version(&in->m, &v);
	if (in->m.size == 0 || (!warmup && ofs_dram_has(&ofs->dram, in->ino, &v)))
		return 0;
	ret = meta_task_pending(ofs->store.meta, in->ino);
	if (ret)
		return ret < 0 ? ret : 0;
	memset(&t, 0, sizeof(t));
	t.ino = in->ino;
	if (meta_path(ofs->store.meta, in->ino, 1, t.key, sizeof(t.key), &klen, NULL))
		t.key[0] = '\0';
	snprintf(t.reason, sizeof(t.reason), "%s", reason);
	t.size = in->m.size;
	t.bucket = in->m.bucket;
	t.page = in->m.page;
	t.csum = in->m.csum;
	ret = meta_task_add(ofs->store.meta, &t);
	if (ret)
		return ret;
	OFS_COUNT(ofs->metrics.promotions_queued, 1);
	pthread_mutex_lock(&ofs->slock);
	pthread_cond_signal(&ofs->pcond);
	pthread_mutex_unlock(&ofs->slock);
	return 0;
}

/* The record of ino as it is now (the table's copy is the freshest). */
static int ofs_current(struct ofs *ofs, uint64_t ino, struct meta_inode *m)
{
	struct ofs_inode *in;
	int ret = 0;

	pthread_mutex_lock(&ofs->lock);
	in = ofs_ifind(ofs, ino);
	if (in)
		*m = in->m;
	else
		ret = meta_get(ofs->store.meta, ino, m);
	pthread_mutex_unlock(&ofs->lock);
	return ret;
}

/* Carry out one claimed task: never on stale pages, never blocking a reader. */
static void ofs_promote_one(struct ofs *ofs, const struct meta_task *t)
{
	struct ofs_dram_version v = { t->bucket, t->page, t->size, t->csum };
	struct kvb_map map = { t->bucket, t->page, (t->size + ofs->store.geom.page_size - 1) /
							ofs->store.geom.page_size, t->size, NULL };
	struct meta_inode m;
	const char *why = NULL;
	int state = META_TASK_DONE, ret;
	uint64_t evicted = 0;
	char *buf = NULL;

	ret = ofs_current(ofs, t->ino, &m);
	if (ret || m.state != META_COMMITTED || m.bucket != t->bucket || m.page != t->page ||
	    m.size != t->size || m.csum != t->csum) {
		state = META_TASK_DROPPED;
		why = ret ? "deleted before the promotion ran" : "overwritten before the promotion ran";
	} else if (!(buf = malloc(t->size ? t->size : 1))) {
		state = META_TASK_FAILED;
		why = "out of memory";
	} else if (kvb_read(&ofs->store.kvb, &map, buf, t->size, 0) !=
		   (ssize_t)t->size) {
		state = META_TASK_FAILED;
		why = "read error";
	} else if (XXH3_64bits(buf, t->size) != t->csum) {
		/* Never keep those bytes: overwritten while we read, or corrupt. */
		ret = ofs_current(ofs, t->ino, &m);
		if (!ret && m.csum == t->csum && m.bucket == t->bucket && m.page == t->page) {
			state = META_TASK_FAILED;
			why = "its pages do not match its checksum";
			OFS_COUNT(ofs->metrics.checksum_failures, 1);
		} else {
			state = META_TASK_DROPPED;
			why = "overwritten while being read";
		}
	} else {
		ret = ofs_dram_insert(&ofs->dram, t->ino, &v, buf, &evicted);
		buf = NULL;
		if (ret) {
			state = META_TASK_FAILED;
			why = ret == -E2BIG ? "larger than the DRAM tier" : strerror(-ret);
		}
		OFS_COUNT(ofs->metrics.dram_evictions, evicted);
	}
	free(buf);
	if (state == META_TASK_DONE)
		OFS_COUNT(ofs->metrics.promotions_done, 1);
	else if (state == META_TASK_DROPPED)
		OFS_COUNT(ofs->metrics.promotions_dropped, 1);
	else
		OFS_COUNT(ofs->metrics.promotions_failed, 1);
	pthread_mutex_lock(&ofs->lock);
	ret = meta_task_finish(ofs->store.meta, t->id, state, why);
	if (ret)
		ofs_log("promotion task %llu: cannot record its end: %s",
			(unsigned long long)t->id, meta_errmsg(ofs->store.meta));
	pthread_mutex_unlock(&ofs->lock);
}

static void *ofs_promoter_main(void *arg)
{
	struct ofs *ofs = arg;
	unsigned long ran = 0;

	for (;;) {
		struct meta_task t;
		int ret;

		pthread_mutex_lock(&ofs->slock);
		if (ofs->stopping) {
			pthread_mutex_unlock(&ofs->slock);
			break;
		}
		pthread_mutex_unlock(&ofs->slock);
		pthread_mutex_lock(&ofs->lock);
		ret = meta_task_claim(ofs->store.meta, &t);
		if (ret == 0 && ++ran % 256 == 0)
			meta_task_prune(ofs->store.meta, 4096);
		pthread_mutex_unlock(&ofs->lock);
		if (ret == 0) {
			ofs_promote_one(ofs, &t);
			continue;
		}
		if (ret != -ENOENT)
			ofs_log("promotion worker: cannot read the task queue: %s", strerror(-ret));
		pthread_mutex_lock(&ofs->slock);
		if (!ofs->stopping) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&ofs->pcond, &ofs->slock, &ts);
		}
		pthread_mutex_unlock(&ofs->slock);
	}
	return NULL;
}

int ofs_promoter_start(struct ofs *ofs)
{
	uint64_t n = 0;

	if (!ofs->dram_capacity)
		return 0;
	pthread_mutex_lock(&ofs->lock);
	/* Tasks a crash interrupted run again. */
	meta_task_requeue(ofs->store.meta, &n);
	pthread_mutex_unlock(&ofs->lock);
	if (pthread_create(&ofs->promoter, NULL, ofs_promoter_main, ofs))
		return -EAGAIN;
	ofs->promoter_running = 1;
	return 0;
}

void ofs_promoter_stop(struct ofs *ofs)
{
	uint64_t *inos;
	size_t n = 0, i;

	if (!ofs->promoter_running)
		return;
	ofs_signal_stop(ofs);
	pthread_join(ofs->promoter, NULL);
	ofs->promoter_running = 0;
	/* What was in DRAM is queued again: the next mount warms itself back up. */
	inos = ofs_dram_list(&ofs->dram, &n);
	pthread_mutex_lock(&ofs->lock);
	for (i = 0; inos && i < n; i++) {
		struct meta_inode m;
		struct ofs_inode tmp = { 0 };

		if (meta_get(ofs->store.meta, inos[i], &m))
			continue;
		tmp.ino = m.ino;
		tmp.m = m;
		ofs_queue_promotion(ofs, &tmp, "warmup");
	}
	pthread_mutex_unlock(&ofs->lock);
	free(inos);
}

/* ---- operations ---- */

static void ofs_op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ofs *ofs = userdata;

	/* 1 MiB requests: a KV block of up to 1 MiB is one write and one read. */
	conn->max_write = 1u << 20;
	conn->max_readahead = 1u << 20;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	/*
	 * O_TRUNC arrives with the open and truncates the writer's working
	 * state.  Without it the kernel sends a SETATTR without a file handle,
	 * which we must treat as truncate(2) and commit at once: a crash before
	 * the close would then leave the file empty instead of as it was.
	 */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/*
	 * Every byte reaches the store through this mount, so a changed mtime
	 * never means the kernel's cached pages are stale: without this the
	 * kernel dropped the pages a put had just written, and the next get
	 * went to the daemon.
	 */
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
	(void)ofs;
}

static void ofs_op_destroy(void *userdata)
{
	struct ofs *ofs = userdata;
	size_t i;

	/*
	 * Writers still open at unmount (a lazy unmount, an aborted
	 * connection) were never closed: drop their working state, as a crash
	 * would, so that only closed or fsynced content is in the snapshot.
	 */
	for (i = 0; i < ofs->tabsize; i++) {
		struct ofs_inode *in = ofs->tab[i], *next;

		for (; in; in = next) {
			next = in->next;
			if (in->obj)
				ofs_obj_close(ofs, in);
			in->nopen = 0;
			in->nlookup = 0;
			pthread_mutex_lock(&ofs->lock);
			ofs_isettle(ofs, in);
			pthread_mutex_unlock(&ofs->lock);
		}
	}
}

static void ofs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ofs *ofs = ofs_of(req);
	struct fuse_entry_param e;
	struct meta_inode m;
	int ret = ofs_check_name(name);

	if (!ret) {
		pthread_mutex_lock(&ofs->lock);
		ret = meta_lookup(ofs->store.meta, parent, name, strlen(name), &m);
		if (!ret)
			ret = ofs_entry(ofs, &m, &e);
		pthread_mutex_unlock(&ofs->lock);
	}
	if (ret == -ENOENT) {
		/* A cached miss: we own the namespace, so the kernel may remember it. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = ofs->timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_entry(req, &e);
}

static void ofs_forget_one(struct ofs *ofs, fuse_ino_t ino, uint64_t n)
{
	struct ofs_inode *in = ofs_ifind(ofs, ino);

	if (!in)
		return;
	in->nlookup = in->nlookup > n ? in->nlookup - n : 0;
	ofs_isettle(ofs, in);
}

static void ofs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct ofs *ofs = ofs_of(req);

	pthread_mutex_lock(&ofs->lock);
	ofs_forget_one(ofs, ino, nlookup);
	pthread_mutex_unlock(&ofs->lock);
	fuse_reply_none(req);
}

static void ofs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct ofs *ofs = ofs_of(req);
	size_t i;

	pthread_mutex_lock(&ofs->lock);
	for (i = 0; i < count; i++)
		ofs_forget_one(ofs, forgets[i].ino, forgets[i].nlookup);
	pthread_mutex_unlock(&ofs->lock);
	fuse_reply_none(req);
}

static void ofs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in;
	struct meta_inode m;
	struct stat st;
	int ret = 0;

	(void)fi;
	pthread_mutex_lock(&ofs->lock);
	in = ofs_ifind(ofs, ino);
	if (in)
		ofs_fill_stat(ofs, in, &in->m, &st);
	else if (!(ret = meta_get(ofs->store.meta, ino, &m)))
		ofs_fill_stat(ofs, NULL, &m, &st);
	pthread_mutex_unlock(&ofs->lock);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, ofs->timeout);
}

static int ofs_setattr_size(struct ofs *ofs, struct ofs_inode *in, uint64_t size, int from_fd)
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

static void ofs_do_setattr(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, struct stat *attr, int to_set,
			   struct fuse_file_info *fi, struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	struct meta_inode m;
	struct stat st;
	int64_t now = ofs_now();
	int ret = 0;

	if (!in) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	pthread_rwlock_wrlock(ofs_rw(ofs, in));
	if (to_set & FUSE_SET_ATTR_SIZE)
		ret = ofs_setattr_size(ofs, in, (uint64_t)attr->st_size, fi != NULL);
	pthread_mutex_lock(&ofs->lock);
	if (!ret) {
		m = in->m;
		if (to_set & FUSE_SET_ATTR_MODE)
			m.mode = (m.mode & S_IFMT) | (attr->st_mode & 07777);
		if (to_set & FUSE_SET_ATTR_UID)
			m.uid = attr->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			m.gid = attr->st_gid;
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			m.atime = now;
		else if (to_set & FUSE_SET_ATTR_ATIME)
			m.atime = (int64_t)attr->st_atim.tv_sec * 1000000000 + attr->st_atim.tv_nsec;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			m.mtime = now;
		else if (to_set & FUSE_SET_ATTR_MTIME)
			m.mtime = (int64_t)attr->st_mtim.tv_sec * 1000000000 + attr->st_mtim.tv_nsec;
		else if (to_set & FUSE_SET_ATTR_SIZE)
			m.mtime = now;
		if (to_set & FUSE_SET_ATTR_CTIME)
			m.ctime = (int64_t)attr->st_ctim.tv_sec * 1000000000 + attr->st_ctim.tv_nsec;
		else
			m.ctime = now;
		ret = meta_update(ofs->store.meta, &m);
		if (!ret)
			in->m = m;
		ofs_fill_stat(ofs, in, &in->m, &st);
	}
	pthread_mutex_unlock(&ofs->lock);
	pthread_rwlock_unlock(ofs_rw(ofs, in));
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, ofs->timeout);
}

static void ofs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			   struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_setattr(req, ino, attr, to_set, fi, in);
	ofs_iput(ofs, in);
}

/* Insert a new file or directory under parent.  Under ofs.lock. */
static int ofs_new_inode(struct ofs *ofs, fuse_req_t req, fuse_ino_t parent, const char *name,
			 mode_t mode, int state, struct meta_inode *m)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct ofs_inode *pdir;
	struct meta_inode dir;
	struct meta *meta = ofs->store.meta;
	int ret = ofs_check_name(name);

	if (!ret)
		ret = ofs_check_key(ofs, parent, strlen(name), 0);
	if (ret)
		return ret;
	/* The kernel holds a lookup on the parent: its attributes are in the table. */
	pdir = ofs_ifind(ofs, parent);
	if (pdir)
		dir = pdir->m;
	else if ((ret = meta_get(ofs->store.meta, parent, &dir)))
		return ret;
	if (!S_ISDIR(dir.mode))
		return -ENOTDIR;
	memset(m, 0, sizeof(*m));
	m->parent = parent;
	m->mode = mode;
	m->uid = ctx->uid;
	/* BSD group semantics under a setgid directory, as ext4 does. */
	m->gid = (dir.mode & S_ISGID) ? dir.gid : ctx->gid;
	if (S_ISDIR(mode) && (dir.mode & S_ISGID))
		m->mode |= S_ISGID;
	m->atime = m->mtime = m->ctime = ofs_now();
	m->nlink = S_ISDIR(mode) ? 2 : 1;
	m->bucket = -1;
	m->state = state;
	/* The entry and its directory's times (and link count) in one transaction. */
	ret = meta_begin(meta);
	if (!ret) {
		ret = meta_insert(meta, m, name, strlen(name));
		if (!ret)
			ret = ofs_dir_changed(ofs, parent, m->ctime);
		if (!ret)
			ret = meta_commit(meta);
		else
			meta_rollback(meta);
		if (ret)
			ofs_dir_reload(ofs, parent);
	}
	if (!ret && S_ISREG(mode))
		ofs->store.nfiles++;
	return ret;
}

/* mkdir and mknod: a new committed directory or empty file, one entry reply. */
static void ofs_make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct ofs *ofs = ofs_of(req);
	struct fuse_entry_param e;
	struct meta_inode m;
	int ret;

	pthread_mutex_lock(&ofs->lock);
	ret = ofs_new_inode(ofs, req, parent, name, mode, META_COMMITTED, &m);
	if (!ret)
		ret = ofs_entry(ofs, &m, &e);
	pthread_mutex_unlock(&ofs->lock);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_entry(req, &e);
}

static void ofs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	ofs_make(req, parent, name, S_IFDIR | (mode & 07777));
}

static void ofs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			 dev_t rdev)
{
	(void)rdev;
	/* Objects are regular files; device nodes, fifos and sockets have no place here. */
	if (!S_ISREG(mode) || parent == META_ROOT_INO) {
		fuse_reply_err(req, EPERM);
		return;
	}
	ofs_make(req, parent, name, S_IFREG | (mode & 07777));
}

static void ofs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link;
	(void)parent;
	(void)name;
	fuse_reply_err(req, EPERM);
}

static void ofs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
	(void)ino;
	(void)parent;
	(void)name;
	fuse_reply_err(req, EPERM);
}

/*
 * Remove a name whose target is m: delete its record, or detach it while it
 * is open.  Under ofs.lock.  Returns the mapping to free (after the record
 * change) in *to_free.
 */
/*
 * The backend's remove_prepare for what dropping parent/name would delete,
 * before the caller takes ofs.lock to drop it: on ubsio it syncs the
 * journal (on a shared ROOT, a network round trip), which must not stall
 * every other request behind ofs.lock.  ofs_drop_name prepares again under
 * the lock, which then costs nothing unless the mapping changed or the
 * journal was reset in between.  Harmless when the drop does not happen:
 * a journalled key that a record still names is kept.
 */
static void ofs_prepare_drop(struct ofs *ofs, uint64_t parent, const char *name)
{
	struct kvb_map map = KVB_MAP_EMPTY;
	struct ofs_inode *in;
	struct meta_inode m;

	if (!kvb_has_remove_prepare(&ofs->store.kvb))
		return;
	pthread_mutex_lock(&ofs->lock);
	if (meta_lookup(ofs->store.meta, parent, name, strlen(name), &m) == 0 &&
	    S_ISREG(m.mode)) {
		in = ofs_ifind(ofs, m.ino);
		if (!in || in->nopen == 0)
			map = ofs_committed(in ? &in->m : &m);
	}
	pthread_mutex_unlock(&ofs->lock);
	if (map.bucket >= 0)
		(void)kvb_remove_prepare(&ofs->store.kvb, &map); /* errors: again under the lock */
}

/*
 * Drop m's name: detach it while it is open, else delete it and return
 * the storage to free in to_free.  Under ofs.lock.
 */
static int ofs_drop_name(struct ofs *ofs, const struct meta_inode *m, struct kvb_map *to_free)
{
	struct ofs_inode *in = ofs_ifind(ofs, m->ino);
	int ret;

	*to_free = KVB_MAP_EMPTY;
	if (ofs->dram_capacity)
		ofs_dram_drop(&ofs->dram, m->ino);
	if (in && in->nopen > 0) {
		ret = meta_detach(ofs->store.meta, m->ino);
		if (!ret)
			in->unlinked = 2;
	} else {
		struct kvb_map map = ofs_committed(in ? &in->m : m);

		ret = map.bucket >= 0 ? kvb_remove_prepare(&ofs->store.kvb, &map) : 0;
		if (!ret)
			ret = meta_delete(ofs->store.meta, m->ino);
		if (!ret) {
			*to_free = map;
			if (in)
				in->unlinked = 1;
		}
	}
	if (!ret && S_ISREG(m->mode))
		ofs->store.nfiles--;
	return ret;
}

/* Undo the in-memory side of ofs_drop_name when its transaction failed. Under ofs.lock. */
static void ofs_undrop(struct ofs *ofs, const struct meta_inode *m, struct kvb_map *to_free)
{
	struct ofs_inode *d = ofs_ifind(ofs, m->ino);

	if (d)
		d->unlinked = 0;
	if (S_ISREG(m->mode))
		ofs->store.nfiles++;
	*to_free = KVB_MAP_EMPTY;
}

/* unlink and rmdir: drop m's name and change its directory's times, in one transaction. */
static int ofs_drop_entry_once(struct ofs *ofs, const struct meta_inode *m,
			       struct kvb_map *to_free)
{
	struct meta *meta = ofs->store.meta;
	int ret = meta_begin(meta);

	*to_free = KVB_MAP_EMPTY;
	if (ret)
		return ret;
	ret = ofs_drop_name(ofs, m, to_free);
	if (ret) {
		meta_rollback(meta);
	} else {
		ret = ofs_dir_changed(ofs, m->parent, ofs_now());
		if (!ret)
			ret = meta_commit(meta);
		else
			meta_rollback(meta);
		if (ret) {
			ofs_undrop(ofs, m, to_free);
			ofs_dir_reload(ofs, m->parent);
		}
	}
	return ret;
}

/* Drop m's entry, in a transaction with its directory's times.  Under ofs.lock. */
static int ofs_drop_entry(struct ofs *ofs, const struct meta_inode *m, struct kvb_map *to_free)
{
	int ret, tries = 0;

	/* A delete must work on a full disk: once more after making room. */
	while ((ret = ofs_drop_entry_once(ofs, m, to_free)) == -ENOSPC && !tries++ &&
	       meta_make_room(ofs->store.meta) == 0)
		;
	return ret;
}

static void ofs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ofs *ofs = ofs_of(req);
	struct kvb_map to_free = KVB_MAP_EMPTY;
	struct meta_inode m;
	int ret;

	ofs_prepare_drop(ofs, parent, name);
	pthread_mutex_lock(&ofs->lock);
	ret = meta_lookup(ofs->store.meta, parent, name, strlen(name), &m);
	if (!ret && S_ISDIR(m.mode))
		ret = -EISDIR;
	if (!ret)
		ret = ofs_drop_entry(ofs, &m, &to_free);
	if (!ret && to_free.bucket >= 0)
		kvb_remove(&ofs->store.kvb, &to_free);
	pthread_mutex_unlock(&ofs->lock);
	fuse_reply_err(req, -ret);
}

static void ofs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ofs *ofs = ofs_of(req);
	struct kvb_map to_free;
	struct meta_inode m;
	int ret;

	pthread_mutex_lock(&ofs->lock);
	ret = meta_lookup(ofs->store.meta, parent, name, strlen(name), &m);
	if (!ret && !S_ISDIR(m.mode))
		ret = -ENOTDIR;
	if (!ret)
		ret = meta_has_children(ofs->store.meta, m.ino);
	if (ret == 1)
		ret = -ENOTEMPTY;
	if (!ret)
		ret = ofs_drop_entry(ofs, &m, &to_free);
	pthread_mutex_unlock(&ofs->lock);
	fuse_reply_err(req, -ret);
}

static int ofs_rename_check(struct ofs *ofs, fuse_ino_t parent, fuse_ino_t newparent,
			    const struct meta_inode *src)
{
	uint64_t t1, t2;
	int ret;

	/* The top level holds tenants only: a tenant may be renamed, not moved in or out. */
	if ((parent == META_ROOT_INO) != (newparent == META_ROOT_INO))
		return S_ISDIR(src->mode) || parent == META_ROOT_INO ? -EXDEV : -EPERM;
	if (parent == newparent)
		return 0;
	ret = ofs_tenant(ofs, parent, &t1);
	if (!ret)
		ret = ofs_tenant(ofs, newparent, &t2);
	if (!ret && t1 != t2)
		ret = -EXDEV;
	return ret;
}

/*
 * A rename must leave every key it moves within META_KEY_MAX: src's own,
 * and for a directory those of its descendants, which it lengthens by as
 * much as its own (walked only then).  Under ofs.lock.
 */
static int ofs_rename_key_check(struct ofs *ofs, fuse_ino_t newparent, const char *newname,
				const struct meta_inode *src)
{
	size_t old = 0, now = 0, deeper = 0;
	int ret = ofs_check_key(ofs, newparent, strlen(newname), 0);

	if (ret || !S_ISDIR(src->mode) || newparent == META_ROOT_INO)
		return ret;
	ret = meta_key_len(ofs->store.meta, src->ino, &old);
	if (ret == -ENAMETOOLONG)
		ret = 0; /* already too long (an older store): check where it goes */
	if (!ret)
		ret = meta_key_len(ofs->store.meta, newparent, &now);
	if (ret)
		return ret;
	now = (now ? now + 1 : 0) + strlen(newname);
	if (now <= old)
		return 0;
	ret = meta_subtree_depth(ofs->store.meta, src->ino, &deeper);
	return ret ? ret : ofs_check_key(ofs, newparent, strlen(newname), deeper);
}

static void ofs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
			  fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct ofs *ofs = ofs_of(req);
	struct meta *meta = ofs->store.meta;
	struct kvb_map to_free = KVB_MAP_EMPTY;
	struct meta_inode src, dst;
	struct ofs_inode *in;
	int64_t now = ofs_now();
	int ret, have_dst = 0, tries = 0;

	if (flags & ~(unsigned)RENAME_NOREPLACE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	ret = ofs_check_name(newname);
	/* The target a rename replaces, prepared outside ofs.lock as unlink's. */
	if (!ret && !(flags & RENAME_NOREPLACE))
		ofs_prepare_drop(ofs, newparent, newname);
	pthread_mutex_lock(&ofs->lock);
	if (!ret)
		ret = meta_lookup(meta, parent, name, strlen(name), &src);
	if (!ret)
		ret = ofs_rename_check(ofs, parent, newparent, &src);
	if (!ret)
		ret = ofs_rename_key_check(ofs, newparent, newname, &src);
	if (!ret) {
		ret = meta_lookup(meta, newparent, newname, strlen(newname), &dst);
		if (ret == -ENOENT) {
			ret = 0;
		} else if (!ret) {
			have_dst = 1;
			if (flags & RENAME_NOREPLACE)
				ret = -EEXIST;
			else if (dst.ino == src.ino)
				goto out; /* the same file: nothing to do */
			else if (S_ISDIR(dst.mode) && !S_ISDIR(src.mode))
				ret = -EISDIR;
			else if (!S_ISDIR(dst.mode) && S_ISDIR(src.mode))
				ret = -ENOTDIR;
			else if (S_ISDIR(dst.mode))
				ret = meta_has_children(meta, dst.ino) ? -ENOTEMPTY : 0;
		}
	}
	/*
	 * Replacing the target and moving the source is one transaction; on a
	 * full disk, once more after making room (a rename must work there).
	 */
again:
	if (!ret)
		ret = meta_begin(meta);
	if (!ret) {
		if (have_dst)
			ret = ofs_drop_name(ofs, &dst, &to_free);
		if (!ret)
			ret = meta_move(meta, src.ino, newparent, newname, strlen(newname));
		if (!ret)
			ret = ofs_dir_changed(ofs, parent, now);
		if (!ret && newparent != parent)
			ret = ofs_dir_changed(ofs, newparent, now);
		if (!ret)
			ret = meta_commit(meta);
		else
			meta_rollback(meta);
		if (ret && have_dst)
			ofs_undrop(ofs, &dst, &to_free);
		if (ret) {
			ofs_dir_reload(ofs, parent);
			ofs_dir_reload(ofs, newparent);
		}
		if (ret == -ENOSPC && !tries++ && meta_make_room(meta) == 0) {
			ret = 0;
			goto again;
		}
	}
	if (!ret) {
		in = ofs_ifind(ofs, src.ino);
		if (in) {
			in->m.parent = newparent;
			in->m.ctime = now;
		}
		if (S_ISDIR(src.mode))
			ofs->dir_renames++; /* the keys below it changed length */
		if (to_free.bucket >= 0)
			kvb_remove(&ofs->store.kvb, &to_free);
	}
out:
	pthread_mutex_unlock(&ofs->lock);
	fuse_reply_err(req, -ret);
}

static int ofs_open_writer(struct ofs *ofs, struct ofs_inode *in, int trunc)
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

/* promote_after=N: the Nth open for reading within the window queues a promotion. */
static void ofs_promotion_policy(struct ofs *ofs, struct ofs_inode *in)
{
	int64_t now = ofs_now();

	if (!ofs->dram_capacity || !ofs->promote_after || in->m.state != META_COMMITTED)
		return;
	if (now - in->window_start > (int64_t)ofs->promote_window * 1000000000LL) {
		in->window_start = now;
		in->read_opens = 0;
	}
	if (++in->read_opens == ofs->promote_after) {
		int ret = ofs_queue_promotion(ofs, in, "policy");

		if (ret && ret != -EINVAL)
			ofs_log("inode %llu: cannot queue a promotion: %s",
				(unsigned long long)in->ino, strerror(-ret));
	}
}

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

/*
 * The bytes of a read, wherever they are: a buffer of ours (own), the
 * backend's own buffer (ref, given back by ofs_bytes_release), or a range
 * of a bucket file (fd >= 0), which the reply splices without a copy.
 */
struct ofs_bytes {
	const void *ptr;
	char *own;
	void *ref;
	int fd;
	off_t pos;
};

static void ofs_bytes_release(struct ofs *ofs, struct ofs_bytes *b)
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
static ssize_t ofs_fetch(struct ofs *ofs, struct ofs_inode *in, const struct kvb_map *map,
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
static struct fuse_bufvec ofs_bytes_vec(const struct ofs_bytes *b, size_t n)
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
static int ofs_prefill(struct ofs *ofs, struct ofs_inode *in)
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

static void ofs_do_open(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, struct fuse_file_info *fi, struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	/* O_RDONLY|O_TRUNC truncates too (Linux does; the kernel checked write access). */
	int writer = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC), ret = 0,
	    prefill;

	if (!in) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (S_ISDIR(in->m.mode)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	/*
	 * Counted open before the working state exists: an unlink from now on
	 * detaches the record instead of deleting it and freeing the pages
	 * this writer may append to.  A record already deleted cannot take a
	 * commit any more.
	 */
	pthread_mutex_lock(&ofs->lock);
	if (in->unlinked == 1)
		ret = -ENOENT;
	else
		in->nopen++;
	/* Every open waits for a prefill in progress: see ofs_prefill. */
	while (!ret && in->kfresh == 2)
		pthread_cond_wait(&ofs->kcond, &ofs->lock);
	prefill = !ret && !writer && in->kfresh == 1 && ofs->prefill_max;
	in->kfresh = prefill ? 2 : 0;
	pthread_mutex_unlock(&ofs->lock);
	if (prefill) {
		/* A value the backend has lost is a file that is gone. */
		ret = ofs_prefill(ofs, in);
		pthread_mutex_lock(&ofs->lock);
		in->kfresh = 0;
		pthread_cond_broadcast(&ofs->kcond);
		if (ret) {
			in->nopen--;
			ofs_isettle(ofs, in);
		}
		pthread_mutex_unlock(&ofs->lock);
	}
	if (!ret && writer) {
		ret = ofs_open_writer(ofs, in, fi->flags & O_TRUNC);
		if (ret) {
			pthread_mutex_lock(&ofs->lock);
			in->nopen--;
			ofs_isettle(ofs, in);
			pthread_mutex_unlock(&ofs->lock);
		}
	}
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	pthread_mutex_lock(&ofs->lock);
	if (!writer) {
		OFS_COUNT(ofs->metrics.objects_read, 1);
		ofs_promotion_policy(ofs, in);
	}
	pthread_mutex_unlock(&ofs->lock);
	fi->fh = (uint64_t)writer;
	/* Every write goes through this mount, so the kernel's cache stays right. */
	fi->keep_cache = 1;
	/* A reader's close has nothing to commit: no FLUSH round trip for it. */
	fi->noflush = !writer;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		/* The opener was interrupted: undo as release would. */
		pthread_rwlock_wrlock(ofs_rw(ofs, in));
		if (writer && --in->nwriters == 0)
			ofs_obj_close(ofs, in);
		pthread_rwlock_unlock(ofs_rw(ofs, in));
		pthread_mutex_lock(&ofs->lock);
		in->nopen--;
		ofs_isettle(ofs, in);
		pthread_mutex_unlock(&ofs->lock);
	}
}

static void ofs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_open(req, ino, fi, in);
	ofs_iput(ofs, in);
}

/*
 * A create that failed after its entry was made, or whose caller was gone
 * before the reply, takes the entry back: a failed create leaves no name.
 * Not once another opener committed content to it.  Under ofs.lock.
 */
static void ofs_unmake(struct ofs *ofs, uint64_t ino)
{
	struct kvb_map to_free;
	struct meta_inode m;
	int ret;

	if (meta_get(ofs->store.meta, ino, &m) || !m.parent || m.state != META_NEW)
		return;
	ret = ofs_drop_entry(ofs, &m, &to_free);
	if (ret)
		ofs_log("inode %llu: cannot remove the entry of a failed create: %s (dropped at "
			"the next mount)", (unsigned long long)ino, strerror(-ret));
	else if (to_free.bucket >= 0)
		kvb_remove(&ofs->store.kvb, &to_free);
}

static void ofs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			  struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct fuse_entry_param e;
	struct ofs_inode *in = NULL;
	struct meta_inode m;
	int ret;

	if (parent == META_ROOT_INO) {
		fuse_reply_err(req, EPERM); /* the top level holds tenant directories only */
		return;
	}
	if (!S_ISREG(mode)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (ofs_store_meta_low(&ofs->store)) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	pthread_mutex_lock(&ofs->lock);
	/* Never committed until its first close or fsync: recovery drops it. */
	ret = ofs_new_inode(ofs, req, parent, name, S_IFREG | (mode & 07777), META_NEW, &m);
	if (!ret) {
		ret = ofs_entry(ofs, &m, &e);
		if (ret)
			ofs_unmake(ofs, m.ino);
	}
	if (!ret) {
		in = ofs_ifind(ofs, m.ino);
		in->kfresh = 0; /* its writer's bytes go through the kernel's cache */
		in->nopen++;
	}
	pthread_mutex_unlock(&ofs->lock);
	if (!ret) {
		ret = ofs_open_writer(ofs, in, 0);
		if (ret) {
			pthread_mutex_lock(&ofs->lock);
			in->nopen--;
			ofs_unmake(ofs, m.ino);
			in->nlookup--;
			ofs_isettle(ofs, in);
			pthread_mutex_unlock(&ofs->lock);
		}
	}
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	fi->fh = 1;
	fi->keep_cache = 1;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		/* The creator was interrupted: the kernel has neither the entry nor the file. */
		pthread_rwlock_wrlock(ofs_rw(ofs, in));
		if (--in->nwriters == 0)
			ofs_obj_close(ofs, in);
		pthread_rwlock_unlock(ofs_rw(ofs, in));
		pthread_mutex_lock(&ofs->lock);
		in->nopen--;
		ofs_unmake(ofs, m.ino);
		in->nlookup--;
		ofs_isettle(ofs, in);
		pthread_mutex_unlock(&ofs->lock);
	}
}

static void ofs_do_read(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, size_t size, off_t off,
			struct fuse_file_info *fi, struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	struct kvb_map map;
	pthread_rwlock_t *lk;
	uint64_t t0 = ofs_now_ns();
	int settle;

	(void)fi;
	if (!in) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	/*
	 * Once the reply is sent the kernel may release and forget the inode
	 * and another thread free it: after the reply only the stripe lock,
	 * which is never freed, may be touched.
	 */
	lk = ofs_rw(ofs, in);
	pthread_rwlock_rdlock(lk);
	if (in->obj)
		kvb_obj_view(&ofs->store.kvb, in->obj, &map);
	else
		map = ofs_committed(&in->m);
	if ((uint64_t)off < map.size && size > map.size - (uint64_t)off)
		size = (size_t)(map.size - (uint64_t)off);
	/* A writer's run may still be filling lazily (copy-on-write): the pages read first. */
	if ((uint64_t)off < map.size && in->obj &&
	    (settle = kvb_obj_settle(&ofs->store.kvb, in->obj, (uint64_t)off, size))) {
		fuse_reply_err(req, -settle);
	} else if ((uint64_t)off >= map.size) {
		fuse_reply_buf(req, NULL, 0);
	} else {
		struct ofs_bytes b;
		ssize_t n = ofs_fetch(ofs, in, &map, size, (uint64_t)off, 0, &b);

		if (n < 0) {
			/* An open file whose value is lost: its bytes cannot be read. */
			fuse_reply_err(req, n == -ENOENT ? EIO : (int)-n);
		} else if (b.fd >= 0) {
			struct fuse_bufvec bv = ofs_bytes_vec(&b, (size_t)n);

			OFS_COUNT(ofs->metrics.bytes_read, (size_t)n);
			fuse_reply_data(req, &bv, 0);
		} else {
			OFS_COUNT(ofs->metrics.bytes_read, (size_t)n);
			fuse_reply_buf(req, b.ptr, (size_t)n);
		}
		ofs_bytes_release(ofs, &b);
	}
	pthread_rwlock_unlock(lk);
	ofs_hist_observe(&ofs->metrics.read_lat, ofs_now_ns() - t0);
}

static void ofs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_read(req, ino, size, off, fi, in);
	ofs_iput(ofs, in);
}

/*
 * A WRITE into in's working state failed.  The writer may be the kernel
 * writing back pages it already acknowledged (mmap, cached writes), whose
 * bytes are now lost: the working state is poisoned, so that no later
 * flush, fsync or release commits it with zeros or old bytes in their
 * place.  Under the inode's rw lock (write).
 */
static void ofs_poison(struct ofs *ofs, struct ofs_inode *in, int err, uint64_t off, size_t len)
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

static void ofs_do_write(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, const char *buf, size_t size, off_t off,
			 struct fuse_file_info *fi, struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	uint64_t t0 = ofs_now_ns();
	ssize_t n;
	int low = 0;

	(void)fi;
	if (!in) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	pthread_rwlock_wrlock(ofs_rw(ofs, in));
	if (!in->obj)
		n = -EBADF;
	else if (in->werr)
		n = in->werr;
	else if ((low = ofs_store_meta_low(&ofs->store)))
		n = -ENOSPC; /* its commit could not be recorded */
	else
		n = kvb_obj_write(&ofs->store.kvb, in->obj, buf, size,
						 (uint64_t)off);
	if (n == -ENOSPC && in->obj && !in->werr && !low && ofs_reclaim(ofs))
		n = kvb_obj_write(&ofs->store.kvb, in->obj, buf, size,
						 (uint64_t)off);
	if (n < 0 && in->obj && !in->werr)
		ofs_poison(ofs, in, (int)n, (uint64_t)off, size);
	if (n > 0) {
		int64_t now = ofs_now();

		pthread_mutex_lock(&ofs->lock);
		in->m.mtime = in->m.ctime = now;
		pthread_mutex_unlock(&ofs->lock);
		OFS_COUNT(ofs->metrics.bytes_written, (uint64_t)n);
	}
	pthread_rwlock_unlock(ofs_rw(ofs, in));
	ofs_hist_observe(&ofs->metrics.write_lat, ofs_now_ns() - t0);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void ofs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_write(req, ino, buf, size, off, fi, in);
	ofs_iput(ofs, in);
}

static void ofs_do_flush(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, struct fuse_file_info *fi, struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	int ret = 0;

	if (in && fi->fh) {
		pthread_rwlock_wrlock(ofs_rw(ofs, in));
		ret = ofs_commit(ofs, in, 0);
		/*
		 * The last writer's close failed: its bytes are dropped, as it was
		 * told, rather than committed by a retry at release, and the
		 * kernel is made to forget the pages that held them.  Writers
		 * still open keep the state they share.  A poisoned state
		 * (ofs_poison) stays until release: this may be the close of
		 * one of several descriptors of the open file, and every later
		 * flush, fsync and the release must fail too.
		 */
		if (ret && in->werr)
			ofs_queue_inval(ofs, ino);
		else if (ret && in->nwriters == 1) {
			ofs_obj_close(ofs, in);
			if (ofs_obj_open(ofs, in))
				ofs_log("inode %llu: no working state after a failed close",
					(unsigned long long)ino);
			ofs_queue_inval(ofs, ino);
		}
		pthread_rwlock_unlock(ofs_rw(ofs, in));
	}
	fuse_reply_err(req, -ret);
}

static void ofs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_flush(req, ino, fi, in);
	ofs_iput(ofs, in);
}

static void ofs_do_release(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, struct fuse_file_info *fi, struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	int ret;

	if (!in) {
		fuse_reply_err(req, 0);
		return;
	}
	if (fi->fh) {
		pthread_rwlock_wrlock(ofs_rw(ofs, in));
		/* mmap writes can arrive after the last flush. */
		ret = ofs_commit(ofs, in, 0);
		if (ret)
			ofs_log("inode %llu: commit at release failed: %s; its last committed "
				"content stays", (unsigned long long)ino, strerror(-ret));
		if (--in->nwriters == 0) {
			ofs_obj_close(ofs, in);
			/* The kernel still caches the bytes that were just dropped. */
			if (ret)
				ofs_queue_inval(ofs, ino);
		}
		pthread_rwlock_unlock(ofs_rw(ofs, in));
	}
	/*
	 * The last close of an unlinked file deletes its record (ofs_isettle):
	 * its key goes to the journal first, outside ofs.lock, as an unlink's
	 * does (ofs_prepare_drop); the prepare under the lock is then free.
	 */
	/* A relaxed read as a hint, so other releases take no extra lock. */
	if (kvb_has_remove_prepare(&ofs->store.kvb) &&
	    __atomic_load_n(&in->unlinked, __ATOMIC_RELAXED) == 2) {
		struct kvb_map map = KVB_MAP_EMPTY;

		pthread_mutex_lock(&ofs->lock);
		if (in->unlinked == 2 && in->nopen == 1)
			map = ofs_committed(&in->m);
		pthread_mutex_unlock(&ofs->lock);
		if (map.bucket >= 0)
			(void)kvb_remove_prepare(&ofs->store.kvb, &map);
	}
	pthread_mutex_lock(&ofs->lock);
	in->nopen--;
	ofs_isettle(ofs, in);
	pthread_mutex_unlock(&ofs->lock);
	fuse_reply_err(req, 0);
}

static void ofs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_release(req, ino, fi, in);
	ofs_iput(ofs, in);
}

static void ofs_do_fsync(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, int datasync, struct fuse_file_info *fi, struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	int ret = -ESTALE;

	(void)datasync;
	(void)fi;
	if (in) {
		pthread_rwlock_wrlock(ofs_rw(ofs, in));
		ret = ofs_commit(ofs, in, 1);
		pthread_rwlock_unlock(ofs_rw(ofs, in));
	}
	fuse_reply_err(req, -ret);
}

static void ofs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_fsync(req, ino, datasync, fi, in);
	ofs_iput(ofs, in);
}

static void ofs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			    struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	int ret;

	(void)ino;
	(void)datasync;
	(void)fi;
	ret = ofs_durable(ofs, NULL);
	fuse_reply_err(req, -ret);
}

/* Zeros for punched and zeroed ranges (never written: it stays in .bss). */
static char ofs_zeros[1u << 20];

/* Write zeros over [off, end) of the working state.  Under in's rw lock. */
static int ofs_zero_range(struct ofs *ofs, struct ofs_inode *in, uint64_t off, uint64_t end)
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

#define OFS_FALLOC_MODES (FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)

/*
 * Mode 0 grows the file (the run reserved, the new bytes zeros).  KEEP_SIZE
 * reserves the run past the end while the file is open for writing (a
 * commit keeps what the size needs).  PUNCH_HOLE and ZERO_RANGE write
 * zeros: a file is one contiguous run, so a hole keeps its pages.
 */
static void ofs_do_fallocate(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, int mode, off_t off, off_t len,
			     struct fuse_file_info *fi, struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	int zero = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE), keep = mode & FALLOC_FL_KEEP_SIZE;
	struct kvb_map view;
	uint64_t end;
	int ret = 0;

	(void)fi;
	/* As the kernel has it: a hole keeps the size, and is not also a zeroed range. */
	if ((mode & ~OFS_FALLOC_MODES) || zero == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) ||
	    ((mode & FALLOC_FL_PUNCH_HOLE) && !keep)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (!in || off < 0 || len <= 0) {
		fuse_reply_err(req, in ? EINVAL : ESTALE);
		return;
	}
	end = (uint64_t)off + (uint64_t)len;
	if (end > (uint64_t)INT64_MAX) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	pthread_rwlock_wrlock(ofs_rw(ofs, in));
	if (!in->obj) {
		ret = -EBADF;
	} else {
		kvb_obj_view(&ofs->store.kvb, in->obj, &view);
		if (zero)
			ret = ofs_zero_range(ofs, in, (uint64_t)off, end < view.size ? end : view.size);
		if (!ret && end > view.size && !keep) {
			ret = kvb_obj_truncate(&ofs->store.kvb, in->obj, end);
			if (ret == -ENOSPC && ofs_reclaim(ofs))
				ret = kvb_obj_truncate(&ofs->store.kvb, in->obj, end);
		} else if (!ret && end > view.size && !zero) {
			ret = kvb_obj_reserve(&ofs->store.kvb, in->obj, end);
			if (ret == -ENOSPC && ofs_reclaim(ofs))
				ret = kvb_obj_reserve(&ofs->store.kvb, in->obj, end);
		}
		/* Content changed: mtime and ctime, as a write's. */
		if (!ret && (zero || (end > view.size && !keep))) {
			pthread_mutex_lock(&ofs->lock);
			in->m.mtime = in->m.ctime = ofs_now();
			pthread_mutex_unlock(&ofs->lock);
		}
	}
	pthread_rwlock_unlock(ofs_rw(ofs, in));
	fuse_reply_err(req, -ret);
}

static void ofs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			     struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_fallocate(req, ino, mode, off, len, fi, in);
	ofs_iput(ofs, in);
}

struct ofs_dirbuf {
	fuse_req_t req;
	struct ofs *ofs;
	char *buf;
	size_t size, used;
	int plus; /* readdirplus: each entry with its attributes, counted as a lookup */
};

/*
 * Add an entry: 1 when the buffer is full (the entry is not added), 0, or
 * -errno.  m: the entry's inode, NULL for "." and "..", which readdirplus
 * sends without attributes (the kernel neither counts nor caches them).
 * Under ofs.lock.
 */
static int ofs_dirbuf_add(struct ofs_dirbuf *d, const char *name, const struct meta_inode *m,
			  uint64_t ino, mode_t mode, off_t next)
{
	size_t room = d->size - d->used, n;

	if (d->plus) {
		struct fuse_entry_param e;
		int ret;

		memset(&e, 0, sizeof(e));
		e.attr.st_ino = ino;
		e.attr.st_mode = mode;
		/* The lookup is counted only for an entry that fits. */
		if (fuse_add_direntry_plus(d->req, NULL, 0, name, &e, next) > room)
			return 1;
		if (m && (ret = ofs_entry(d->ofs, m, &e)))
			return ret;
		n = fuse_add_direntry_plus(d->req, d->buf + d->used, room, name, &e, next);
	} else {
		struct stat st = { .st_ino = ino, .st_mode = mode };

		n = fuse_add_direntry(d->req, d->buf + d->used, room, name, &st, next);
	}
	if (n > room)
		return 1;
	d->used += n;
	return 0;
}

static int ofs_readdir_one(void *ctx, const struct meta_inode *in, const char *name, size_t len)
{
	char z[META_NAME_MAX + 1];

	if (len > META_NAME_MAX)
		return 0;
	memcpy(z, name, len);
	z[len] = '\0';
	/* The offset of an entry is its ino + 2: stable while entries come and go. */
	return ofs_dirbuf_add(ctx, z, in, in->ino, in->mode, (off_t)(in->ino + 2));
}

static void ofs_do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_dirbuf d = { .req = req, .ofs = ofs, .size = size, .plus = plus };
	struct meta_inode dir;
	int ret;

	d.buf = malloc(size);
	if (!d.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&ofs->lock);
	ret = meta_get(ofs->store.meta, ino, &dir);
	if (!ret && !S_ISDIR(dir.mode))
		ret = -ENOTDIR;
	if (!ret && off < 1)
		ret = ofs_dirbuf_add(&d, ".", NULL, ino, S_IFDIR, 1);
	if (!ret && off < 2)
		ret = ofs_dirbuf_add(&d, "..", NULL, dir.parent ? dir.parent : ino, S_IFDIR, 2);
	if (!ret)
		ret = meta_readdir(ofs->store.meta, ino, off < 2 ? 0 : (uint64_t)off - 2,
				   ofs_readdir_one, &d);
	if (ret == 1)
		ret = 0; /* the buffer is full */
	else if (ret < 0 && d.used > 0 && plus)
		ret = 0; /* the entries in it are counted as looked up: send them */
	pthread_mutex_unlock(&ofs->lock);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_buf(req, d.buf, d.used);
	free(d.buf);
}

static void ofs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	ofs_do_readdir(req, ino, size, off, 0);
}

/* With the attributes: `ls -l` of a tenant takes no LOOKUP per key. */
static void ofs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			       struct fuse_file_info *fi)
{
	(void)fi;
	ofs_do_readdir(req, ino, size, off, 1);
}

static void ofs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ofs *ofs = ofs_of(req);
	struct kvb_statfs ks = { 0 };
	struct statvfs st;
	int ret;

	(void)ino;
	ret = kvb_statfs(&ofs->store.kvb, &ks);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	memset(&st, 0, sizeof(st));
	st.f_bsize = ks.block_size;
	st.f_frsize = ks.block_size;
	st.f_blocks = ks.blocks;
	/* Nothing new fits while the metadata's disk is short (ofs_store_meta_low). */
	if (ofs_store_meta_low(&ofs->store))
		ks.blocks_free = 0;
	st.f_bfree = ks.blocks_free;
	st.f_bavail = ks.blocks_free;
	pthread_mutex_lock(&ofs->lock);
	st.f_files = ofs->store.nfiles;
	pthread_mutex_unlock(&ofs->lock);
	if (ks.files) {
		/* A backend key limit (kv_max_keys): files are what it allows. */
		st.f_files = ks.files;
		st.f_ffree = ks.files_free;
	} else {
		/* Objects are rows, not preallocated inodes: the free count is what the rows allow. */
		st.f_ffree = UINT32_MAX;
		st.f_files += st.f_ffree;
	}
	st.f_favail = st.f_ffree;
	st.f_namemax = META_NAME_MAX;
	fuse_reply_statfs(req, &st);
}

/* A user xattr the store keeps: user.*, but for our own names. */
static int ofs_user_xattr(const char *name)
{
	return !strncmp(name, "user.", 5) &&
	       strncmp(name, OURS_XATTR_PREFIX, sizeof(OURS_XATTR_PREFIX) - 1);
}

static void ofs_get_user_xattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ofs *ofs = ofs_of(req);
	char *buf = NULL;
	ssize_t n;

	if (size > META_XATTR_SIZE_MAX)
		size = META_XATTR_SIZE_MAX;
	if (size && !(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&ofs->lock);
	n = meta_xattr_get(ofs->store.meta, ino, name, buf, size);
	pthread_mutex_unlock(&ofs->lock);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

/*
 * Set or remove (value NULL) a user xattr of ino, and its ctime, in one
 * transaction.  Under ofs.lock.
 */
static int ofs_change_user_xattr(struct ofs *ofs, fuse_ino_t ino, const char *name,
				 const char *value, size_t size, int flags)
{
	struct meta *meta = ofs->store.meta;
	struct ofs_inode *in = ofs_ifind(ofs, ino);
	struct meta_inode m;
	int ret;

	/* The kernel holds the inode: in the table, unless its record is gone. */
	if (!in || in->unlinked == 1)
		return -ESTALE;
	ret = meta_begin(meta);
	if (ret)
		return ret;
	ret = value ? meta_xattr_set(meta, ino, name, value, size, flags)
		    : meta_xattr_remove(meta, ino, name);
	if (!ret) {
		m = in->m;
		m.ctime = ofs_now();
		ret = meta_update(meta, &m);
	}
	if (!ret)
		ret = meta_commit(meta);
	else
		meta_rollback(meta);
	if (!ret)
		in->m.ctime = m.ctime;
	return ret;
}

static void ofs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in;
	char buf[3 * 4096 + 128]; /* a descriptor's escaped path or key: up to 3 bytes each */
	int ret = -ENODATA, desc = !strcmp(name, DESCRIPTOR_XATTR);

	if (ino == META_ROOT_INO && !strcmp(name, METRICS_XATTR)) {
		/* The live metrics, for offloadctl stats. */
		size_t len = 0;
		char *text = ofs_metrics_render(ofs, &len);

		if (!text)
			fuse_reply_err(req, ENOMEM);
		else if (size == 0)
			fuse_reply_xattr(req, len);
		else if (size < len)
			fuse_reply_err(req, ERANGE);
		else
			fuse_reply_buf(req, text, len);
		free(text);
		return;
	}
	if (ofs_user_xattr(name)) {
		ofs_get_user_xattr(req, ino, name, size);
		return;
	}
	/* Anything else (security.capability on every write) is answered at once. */
	if (!desc && strcmp(name, CHECKSUM_XATTR)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	pthread_mutex_lock(&ofs->lock);
	in = ofs_ifind(ofs, ino);
	/* Only committed content has a descriptor another process can trust. */
	if (in && S_ISREG(in->m.mode) && in->m.state == META_COMMITTED) {
		struct kvb_map map = ofs_committed(&in->m);

		if (desc)
			ret = kvb_describe(&ofs->store.kvb, &map, buf,
							   sizeof(buf));
		else
			ret = snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)in->m.csum);
	}
	pthread_mutex_unlock(&ofs->lock);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)ret);
	else if (size < (size_t)ret)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, (size_t)ret);
}

/*
 * The user's xattrs only.  Ours are read by name and not listed, as CephFS
 * does with its virtual ones: copy tools (cp --preserve=xattr, rsync -X)
 * would otherwise copy a descriptor that names another file's pages, or
 * fail removing ours from a copy.
 */
static void ofs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct ofs *ofs = ofs_of(req);
	char *buf = size ? malloc(size) : NULL;
	ssize_t n = -ENOMEM;

	if (!size || buf) {
		pthread_mutex_lock(&ofs->lock);
		n = meta_xattr_list(ofs->store.meta, ino, buf, size);
		pthread_mutex_unlock(&ofs->lock);
	}
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void ofs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			    size_t size, int flags)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in;
	int ret;

	if (ofs_user_xattr(name)) {
		if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) {
			ret = -EINVAL;
		} else {
			pthread_mutex_lock(&ofs->lock);
			ret = ofs_change_user_xattr(ofs, ino, name, value, size,
						    (flags & XATTR_CREATE ? META_XATTR_CREATE : 0) |
						    (flags & XATTR_REPLACE ? META_XATTR_REPLACE : 0));
			pthread_mutex_unlock(&ofs->lock);
		}
		fuse_reply_err(req, -ret);
		return;
	}
	/* Our own names are read-only; other namespaces are not kept. */
	if (strcmp(name, PROMOTE_XATTR)) {
		fuse_reply_err(req, strncmp(name, OURS_XATTR_PREFIX, sizeof(OURS_XATTR_PREFIX) - 1)
					    ? ENOTSUP
					    : EPERM);
		return;
	}
	/* setfattr -n user.offload.promote -v 1 FILE: queue a promotion to DRAM. */
	if (size != 1 || value[0] != '1') {
		fuse_reply_err(req, EINVAL);
		return;
	}
	pthread_mutex_lock(&ofs->lock);
	in = ofs_ifind(ofs, ino);
	ret = in ? ofs_queue_promotion(ofs, in, "request") : -ESTALE;
	pthread_mutex_unlock(&ofs->lock);
	fuse_reply_err(req, -ret);
}

static void ofs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct ofs *ofs = ofs_of(req);
	int ret;

	if (ofs_user_xattr(name)) {
		pthread_mutex_lock(&ofs->lock);
		ret = ofs_change_user_xattr(ofs, ino, name, NULL, 0, 0);
		pthread_mutex_unlock(&ofs->lock);
		fuse_reply_err(req, -ret);
		return;
	}
	fuse_reply_err(req, strcmp(name, DESCRIPTOR_XATTR) && strcmp(name, CHECKSUM_XATTR) ? ENODATA
											     : EPERM);
}

void ofs_init_ops(struct fuse_lowlevel_ops *ops)
{
	memset(ops, 0, sizeof(*ops));
	ops->init = ofs_op_init;
	ops->destroy = ofs_op_destroy;
	ops->lookup = ofs_op_lookup;
	ops->forget = ofs_op_forget;
	ops->forget_multi = ofs_op_forget_multi;
	ops->getattr = ofs_op_getattr;
	ops->setattr = ofs_op_setattr;
	ops->mknod = ofs_op_mknod;
	ops->mkdir = ofs_op_mkdir;
	ops->symlink = ofs_op_symlink;
	ops->link = ofs_op_link;
	ops->unlink = ofs_op_unlink;
	ops->rmdir = ofs_op_rmdir;
	ops->rename = ofs_op_rename;
	ops->open = ofs_op_open;
	ops->create = ofs_op_create;
	ops->read = ofs_op_read;
	ops->write = ofs_op_write;
	ops->flush = ofs_op_flush;
	ops->release = ofs_op_release;
	ops->readdirplus = ofs_op_readdirplus;
	ops->fsync = ofs_op_fsync;
	ops->fsyncdir = ofs_op_fsyncdir;
	ops->fallocate = ofs_op_fallocate;
	ops->readdir = ofs_op_readdir;
	ops->statfs = ofs_op_statfs;
	ops->getxattr = ofs_op_getxattr;
	ops->listxattr = ofs_op_listxattr;
	ops->setxattr = ofs_op_setxattr;
	ops->removexattr = ofs_op_removexattr;
}
