/*
 * workers.c: the daemon's threads outside requests.  The group-commit
 * thread runs the barrier every sync interval, sends the kernel the
 * invalidations requests queued (libfuse allows them outside a request
 * only), watches the metadata disk's space and writes the metrics file.
 * The promotion worker copies queued objects into the DRAM tier.  The
 * eviction worker runs the store's eviction passes (store/evict.h).
 */
#include "ofs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* The group-commit thread's tick without a sync interval: space, invalidations, metrics. */
#define OFS_TICK_MS 1000U
#define OFS_METRICS_EVERY_NS 5000000000ULL /* the metrics file, rewritten */

/* Ask the group-commit thread to drop the kernel's cached pages of ino. */
void ofs_queue_inval(struct ofs *ofs, uint64_t ino)
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

void ofs_queue_inval_attr(struct ofs *ofs, uint64_t ino)
{
	pthread_mutex_lock(&ofs->slock);
	/* Not urgent, and never a reason to wake the group commit: dropped when full. */
	if (ofs->ninval_attr < OFS_INVAL_MAX)
		ofs->inval_attr[ofs->ninval_attr++] = ino;
	pthread_mutex_unlock(&ofs->slock);
}

void ofs_evicted(void *arg, uint64_t parent, const char *name, size_t len)
{
	ofs_queue_inval_entry(arg, parent, name, len);
}

void ofs_atime_moved(void *arg, uint64_t ino)
{
	ofs_queue_inval_attr(arg, ino);
}

void ofs_queue_inval_entry(struct ofs *ofs, uint64_t parent, const char *name, size_t len)
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
	uint64_t inos[OFS_INVAL_MAX], attrs[OFS_INVAL_MAX];
	struct ofs_inval_entry ents[OFS_INVAL_ENTRY_MAX];
	unsigned n, ne, na, i;

	pthread_mutex_lock(&ofs->slock);
	n = ofs->ninval;
	memcpy(inos, ofs->inval, n * sizeof(inos[0]));
	ofs->ninval = 0;
	ne = ofs->ninval_entry;
	memcpy(ents, ofs->inval_entry, ne * sizeof(ents[0]));
	ofs->ninval_entry = 0;
	na = ofs->ninval_attr;
	memcpy(attrs, ofs->inval_attr, na * sizeof(attrs[0]));
	ofs->ninval_attr = 0;
	pthread_mutex_unlock(&ofs->slock);
	/* A negative offset: the attributes only, the cached pages stay. */
	for (i = 0; ofs->se && i < na; i++)
		fuse_lowlevel_notify_inval_inode(ofs->se, attrs[i], -1, 0);
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
	int did = ofs_store_space(&ofs->store, &ofs->store.lock, 0);

	if (did & OFS_SPACE_RELEASED)
		ofs_log("the disk holding %s is nearly full: its %llu KiB reserve given back "
			"(writes get ENOSPC; deletes free space)",
			ofs->store.meta_shown, (unsigned long long)ofs->store.reserve_size >> 10);
	if (did & OFS_SPACE_ARMED)
		ofs_log("space is back on the disk holding %s: its reserve taken again",
			ofs->store.meta_shown);
}

static void *ofs_syncer(void *arg)
{
	struct ofs *ofs = arg;
	uint64_t seen = 0;

	uint64_t last_metrics = 0;
	unsigned period = ofs->sync_ms ? ofs->sync_ms : OFS_TICK_MS;
	uint64_t period_ns = (uint64_t)period * 1000000ULL, next = ofs_now_ns() + period_ns;

	/*
	 * The barrier and the flush of last uses hold the store's lock, which
	 * every request takes: during a server's outage they fail at once and
	 * are tried at the next tick, rather than stall reads for meta_timeout.
	 */
	meta_thread_nowait(1);
	pthread_mutex_lock(&ofs->slock);
	while (!ofs->stopping) {
		struct timespec ts;
		uint64_t changes, now = ofs_now_ns(), left = next > now ? next - now : 0;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)(left / 1000000000ULL);
		ts.tv_nsec += (long)(left % 1000000000ULL);
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (left)
			pthread_cond_timedwait(&ofs->scond, &ofs->slock, &ts);
		if (ofs->stopping)
			break;
		pthread_mutex_unlock(&ofs->slock);
		/*
		 * Woken before the interval ends (invalidations queued, as each
		 * eviction does): those are sent now, the barrier waits for the
		 * interval, so an eviction pass does not cost a second one.
		 */
		if (ofs_now_ns() < next) {
			ofs_send_invals(ofs);
			pthread_mutex_lock(&ofs->slock);
			continue;
		}
		/* The last uses of the interval, in one transaction (durable at the next barrier). */
		ofs_evict_flush(&ofs->store);
		pthread_mutex_lock(&ofs->store.lock);
		changes = meta_changes(ofs->store.meta);
		pthread_mutex_unlock(&ofs->store.lock);
		ofs_send_invals(ofs);
		/*
		 * Group commit: one barrier covers every commit, create, rename
		 * and unlink of the interval, and gives back the pages they freed.
		 */
		if (ofs->sync_ms && changes != seen) {
			seen = changes;
			ofs_store_barrier(&ofs->store, NULL);
		}
		/* Freed runs that stayed free give their blocks back (first, when space is short). */
		kvb_tick(&ofs->store.kvb);
		/* The log's pages the kernel evicted, read back before a commit writes into them. */
		meta_log_prefetch(ofs->store.meta);
		ofs_watch_space(ofs);
		/* No eviction worker (it could not start): its passes at this tick. */
		if (__atomic_load_n(&ofs->evict_in_syncer, __ATOMIC_RELAXED) &&
		    ofs_evict_tick(&ofs->store))
			ofs_send_invals(ofs);
		/* The textfile collector's file, every few seconds. */
		if (ofs->metrics_path && ofs_now_ns() - last_metrics >= OFS_METRICS_EVERY_NS) {
			int r = ofs_metrics_write(ofs, ofs->metrics_path);

			if (r && !last_metrics)
				ofs_log("cannot write metrics to %s: %s", ofs->metrics_path,
					strerror(-r));
			last_metrics = ofs_now_ns();
		}
		/* A full interval from the end of this tick, however long it took. */
		next = ofs_now_ns() + period_ns;
		pthread_mutex_lock(&ofs->slock);
	}
	pthread_mutex_unlock(&ofs->slock);
	ofs_evict_flush(&ofs->store); /* the unmount's snapshot keeps them */
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

/* Evicted names reach the kernel through the group-commit thread (ofs_evicted wakes it). */
static void *ofs_evictor_main(void *arg)
{
	struct ofs *ofs = arg;

	/* Its passes hold the store's lock: during a server's outage they fail, not wait. */
	meta_thread_nowait(1);
	ofs_evict_worker(&ofs->store, OFS_TICK_MS);
	return NULL;
}

int ofs_evictor_start(struct ofs *ofs)
{
	if (pthread_create(&ofs->evictor, NULL, ofs_evictor_main, ofs)) {
		__atomic_store_n(&ofs->evict_in_syncer, 1, __ATOMIC_RELAXED);
		return -EAGAIN;
	}
	ofs->evictor_running = 1;
	return 0;
}

void ofs_evictor_stop(struct ofs *ofs)
{
	if (!ofs->evictor_running)
		return;
	ofs_evict_worker_stop(&ofs->store);
	pthread_join(ofs->evictor, NULL);
	ofs->evictor_running = 0;
}

static void *ofs_promoter_main(void *arg)
{
	struct ofs *ofs = arg;

	for (;;) {
		struct meta_task t;
		int ret;

		pthread_mutex_lock(&ofs->slock);
		if (ofs->stopping) {
			pthread_mutex_unlock(&ofs->slock);
			break;
		}
		pthread_mutex_unlock(&ofs->slock);
		ret = ofs_promote_claim(&ofs->store, &t);
		if (ret == 0) {
			ofs_promote_run(&ofs->store, &t);
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
	if (!ofs->store.dram_capacity)
		return 0;
	ofs_promote_requeue(&ofs->store);
	if (pthread_create(&ofs->promoter, NULL, ofs_promoter_main, ofs))
		return -EAGAIN;
	ofs->promoter_running = 1;
	return 0;
}

void ofs_promoter_stop(struct ofs *ofs)
{
	if (!ofs->promoter_running)
		return;
	ofs_signal_stop(ofs);
	pthread_join(ofs->promoter, NULL);
	ofs->promoter_running = 0;
	/* What was in DRAM is queued again: the next mount warms itself back up. */
	ofs_promote_warmup(&ofs->store);
}

int ofs_queue_promotion(struct ofs *ofs, struct ofs_inode *in, const char *reason)
{
	int ret = ofs_promote_queue(&ofs->store, &in->o.m, reason);

	if (ret <= 0)
		return ret;
	pthread_mutex_lock(&ofs->slock);
	pthread_cond_signal(&ofs->pcond);
	pthread_mutex_unlock(&ofs->slock);
	return 0;
}

/* promote_after=N: the Nth open for reading within the window queues a promotion. */
void ofs_promotion_policy(struct ofs *ofs, struct ofs_inode *in)
{
	int64_t now = ofs_now();

	if (!ofs->store.dram_capacity || !ofs->promote_after || in->o.m.state != META_COMMITTED)
		return;
	if (now - in->window_start > (int64_t)ofs->promote_window * 1000000000LL) {
		in->window_start = now;
		in->read_opens = 0;
	}
	if (++in->read_opens == ofs->promote_after) {
		int ret = ofs_queue_promotion(ofs, in, "policy");

		if (ret && ret != -EINVAL)
			ofs_log("inode %llu: cannot queue a promotion: %s",
				(unsigned long long)in->o.m.ino, strerror(-ret));
	}
}
