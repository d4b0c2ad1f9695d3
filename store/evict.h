/*
 * evict: the store as a cache.  Recency: each open sets the object's atime
 * (its last use) in memory, and the group-commit thread writes the changed
 * ones in one transaction.  Eviction: above the high watermark of the
 * capacity statfs reports, or when a write finds no room, the least
 * recently used closed objects are unlinked (the store's drop: durable,
 * pages freed at the next barrier) until the low one.  Never evicted:
 * objects open anywhere or being written, pinned (OFS_PIN_XATTR),
 * directories.  Objects younger than min_age by any of their times go
 * only for a write that finds no room, and after every older one.
 */
#ifndef OFFLOADFS_EVICT_H
#define OFFLOADFS_EVICT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define OFS_PIN_XATTR "user.offload.pin"
/* On a tenant directory: the bytes its files may hold (0 or absent: no limit). */
#define OFS_QUOTA_XATTR "user.offload.quota"
#define OFS_EVICT_HIGH 90       /* percent of capacity */
#define OFS_EVICT_LOW 80
#define OFS_EVICT_MIN_AGE 10    /* seconds */
#define OFS_EVICT_TENANTS 64    /* tenants whose evictions are counted apart */
#define OFS_EVICT_WANTS 16      /* tenants of writers waiting for a put pass, apart */

enum ofs_evict_reason { OFS_EVICT_WATERMARK, OFS_EVICT_PUT, OFS_EVICT_QUOTA, OFS_EVICT_MANUAL,
			OFS_EVICT_NREASONS };
extern const char *const ofs_evict_reason_name[OFS_EVICT_NREASONS];

struct ofs_store;
struct ofs_object;

struct ofs_evict {
	int on;                  /* evict=lru; 0: ENOSPC when full */
	unsigned high, low;      /* percent of capacity */
	int64_t min_age_ns;
	pthread_mutex_t run;     /* one eviction pass at a time */
	/*
	 * Objects whose atime changed since the last write of atimes, each
	 * once (an object records the round it was queued in), with the
	 * atime to write should the object leave memory first.  round counts
	 * the writes of atimes.  Under the store's lock.
	 */
	uint64_t *dirty;
	int64_t *dirty_atime;
	size_t ndirty, dirty_cap;
	uint64_t round;
	int loose;               /* some queued without their object: maybe twice */
	/*
	 * Objects that left memory this round after a utimens
	 * (ofs_evict_forget): the time set replaces their uses queued before
	 * they left (dirty[0, upto)) at the write of atimes.  Under the
	 * store's lock.
	 */
	struct ofs_evict_set {
		uint64_t ino;
		int64_t atime;
		size_t upto;
	} *set;
	size_t nset, set_cap;
	/*
	 * Where inos queued without their object went this round: a use of
	 * one again (a key every batch reads) updates its slot instead of
	 * queuing it once more.  Direct-mapped by ino; a collision only
	 * queues a duplicate, which the write of atimes drops.  NULL when
	 * out of memory.  Under the store's lock.
	 */
	struct ofs_evict_loose {
		uint64_t ino, round; /* round: e->round + 1 when queued, 0: empty */
		size_t slot;
	} *loose_slot;
	/*
	 * Told of each evicted name (parent, name), under the store's lock:
	 * the daemon has the kernel forget it.
	 */
	void (*gone)(void *arg, uint64_t parent, const char *name, size_t len);
	/*
	 * Told (with gone_arg, under the store's lock) of an object in memory
	 * whose atime a write of atimes moved: a use that found it out of
	 * memory (ofs_evict_touch_ino) and its load since, which the kernel
	 * may have cached the older time of.
	 */
	void (*moved)(void *arg, uint64_t ino);
	void *gone_arg;
	uint64_t evictions[OFS_EVICT_NREASONS], evicted_bytes; /* atomics */
	uint64_t put_waits;      /* writers that waited for the worker's pass; atomic */
	/*
	 * The eviction worker (ofs_evict_worker): a pass is wanted when a
	 * commit finds usage above the high watermark, so the worker frees
	 * the band between the watermarks while writers go on into it, and
	 * when a write finds no room: that writer waits for the worker's pass
	 * (one pass and one barrier for all writers waiting) instead of
	 * evicting on its own.  Under wlock.
	 */
	pthread_mutex_t wlock;
	pthread_cond_t wcond;    /* the worker: a pass is wanted; writers: a pass ended */
	int worker;              /* a worker runs the passes: writers wait for it */
	int wanted, put_wanted;  /* a pass wanted; by a writer with no room */
	int busy, stop;
	int64_t quiet_until;     /* after a pass that freed nothing: commits wake none till then */
	uint64_t passes;         /* passes ended */
	uint64_t room_pass;      /* the last pass that freed or released something (passes then) */
	/*
	 * The tenants of the writers waiting for the next put pass and the
	 * bytes their files grow by: a tenant that would pass its quota
	 * gives that room first (evict_for_room).  Writers past the last
	 * slot are served as writers outside any tenant.
	 */
	struct ofs_evict_want {
		uint64_t tenant, bytes;
	} want[OFS_EVICT_WANTS];
	unsigned nwant;
	/*
	 * With eviction off: the tenants with a quota, their usage at the
	 * last tick plus what their writes have grown files by since (a
	 * rewrite counts twice until the tick: on the safe side).  At the
	 * quota, new files and writers' opens get EDQUOT; a write that would
	 * go past it too.  Under the store's lock.
	 */
	struct ofs_tenant_quota {
		uint64_t ino, quota, used;
	} quotas[64];
	unsigned nquotas;
	/*
	 * Evictions by tenant directory, for the first OFS_EVICT_TENANTS
	 * tenants an eviction touched (the others count in the totals only),
	 * kept in the metadata: loaded at init, and those changed (dirty)
	 * written with the atimes, after the evictions they count.  Under the
	 * store's lock.
	 */
	struct ofs_tenant_evicted {
		uint64_t ino, count, bytes;
		int dirty;
		char name[256];
	} tev[OFS_EVICT_TENANTS];
	unsigned ntev;
	int tev_dirty;           /* some tev[] dirty */
};

/* Also loads the per-tenant eviction counts of the store's metadata. */
void ofs_evict_init(struct ofs_store *s, int on, unsigned high, unsigned low,
		    unsigned min_age_s);
void ofs_evict_fini(struct ofs_store *s);
/*
 * An open of o: its last use (atime) is now.  1 when relatime would have
 * moved the atime shown (it was older than mtime or ctime, or than a
 * day): the kernel's cached attributes are then to be dropped.  Under the
 * store's lock.
 */
int ofs_evict_touch(struct ofs_store *s, struct ofs_object *o);
/*
 * o leaves memory: a utimens of it since the last write of atimes
 * overrides its queued uses, which are written without it.  Under the
 * store's lock.
 */
void ofs_evict_forget(struct ofs_store *s, const struct ofs_object *o);
/*
 * A use at now (ofs_now(): one reading for a batch's keys) of the object
 * ino that reached no OPEN (a batch lookup): as ofs_evict_touch when the
 * object is in memory, else its atime is queued for the next write of
 * atimes all the same.  1 as ofs_evict_touch.  Under the store's lock.
 */
int ofs_evict_touch_ino(struct ofs_store *s, uint64_t ino, int64_t now);
/*
 * Write the changed atimes and per-tenant eviction counts in one
 * transaction.  Takes the store's lock.
 */
int ofs_evict_flush(struct ofs_store *s);
/*
 * Evict least recently used objects (of the tenant directory tenant; 0:
 * any) until need bytes are freed or no candidate is left, then run the
 * barrier that makes the pages reusable.  Returns the bytes freed.  No
 * lock held, or an object's stripe.
 */
uint64_t ofs_evict(struct ofs_store *s, uint64_t need, uint64_t tenant,
		   enum ofs_evict_reason reason);
/*
 * The tick's pass: tenants over their quota down to it (again, by their
 * usage of then, while writers keep the store above the high watermark),
 * then above high, evict down to low.  No lock held.
 */
uint64_t ofs_evict_tick(struct ofs_store *s);
/*
 * A write found no room for bytes more of a file of the tenant directory
 * tenant (0: none): with a worker, wait for its pass; without, run one
 * here: the barrier that releases what deletes freed, else tenants over
 * their quota, or that this write would take past it, down to it, else
 * evict down to the low watermark, at least the band between the two;
 * objects younger than min_age too, after the older ones.  1 when
 * something was freed or released (retry).  No lock held, or an
 * object's stripe.
 */
int ofs_evict_for_put(struct ofs_store *s, uint64_t tenant, uint64_t bytes);
/*
 * A commit: above the high watermark, wake the worker (at once, not at
 * its tick), unless a pass runs or the last one found nothing to evict
 * within the tick.  No lock held, or an object's stripe.
 */
void ofs_evict_poke(struct ofs_store *s);
/*
 * The eviction worker's loop, run by a thread of the daemon until
 * ofs_evict_worker_stop: each tick_ms, and at once when a pass is wanted,
 * a pass (tenants over their quota, then above the high watermark down to
 * the low one; for a writer with no room, as ofs_evict_for_put without a
 * worker).  It never calls into the kernel itself (gone() queues the
 * names): a writer waiting for its pass may be inside a request that holds
 * the directory an invalidation would lock.
 */
void ofs_evict_worker(struct ofs_store *s, unsigned tick_ms);
/* End ofs_evict_worker's loop; writers waiting evict on their own from then on. */
void ofs_evict_worker_stop(struct ofs_store *s);

/* A tenant with a quota: what its files hold (pages, in bytes) and may hold. */
struct ofs_tenant_use {
	uint64_t ino, used, quota;
	char name[256];
};
/* Up to max tenants with a quota into t; returns how many.  Takes the store's lock. */
int ofs_evict_tenants(struct ofs_store *s, struct ofs_tenant_use *t, int max);
/* The per-tenant eviction counts into t (up to max); returns how many.  Takes the store's lock. */
int ofs_evict_tenant_counts(struct ofs_store *s, struct ofs_tenant_evicted *t, int max);
/* Evict from each tenant over its quota down to it.  Bytes freed.  No lock held. */
uint64_t ofs_evict_quotas(struct ofs_store *s);
/*
 * -EDQUOT when ino (a directory for a create, a file for an open for
 * writing) is in a tenant that was over its quota at the last tick and
 * eviction is off.  Under the store's lock.
 */
int ofs_evict_quota_check(struct ofs_store *s, uint64_t ino);
/*
 * Eviction off: a write, truncate or fallocate grows o's run (o open for
 * writing) by grow bytes.  -EDQUOT when that takes its tenant past its
 * quota; else the growth counts in the tenant's usage until the next
 * tick.  Takes the store's lock.
 */
int ofs_evict_quota_write(struct ofs_store *s, struct ofs_object *o, uint64_t grow);
/*
 * Eviction off: a new object of size bytes (whole pages) in the tenant
 * directory tenant, reserved outside any object (a batch put): charged
 * as ofs_evict_quota_write charges a growth.  Takes the store's lock.
 */
int ofs_evict_quota_reserve(struct ofs_store *s, uint64_t tenant, uint64_t size);

#endif
