/*
 * evict.c: recency (atimes set at open, written in batches) and LRU
 * eviction by unlink.  See evict.h.
 */
#include "evict.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "ns.h"
#include "object.h"

const char *const ofs_evict_reason_name[OFS_EVICT_NREASONS] = { "watermark", "put", "quota",
								"manual" };

/* Candidates read per query, under the store's lock. */
#define EVICT_BATCH 64

#define EVICT_GONE_MAX 64

struct evict_load {
	struct ofs_store *s;
	uint64_t gone[EVICT_GONE_MAX]; /* rows of tenants removed since */
	unsigned ngone;
};

/* A tenant's name for stats, cut to fit dst (size bytes with the NUL). */
static void evict_name(char *dst, size_t size, const char *name, size_t len)
{
	if (len >= size)
		len = size - 1;
	memcpy(dst, name, len);
	dst[len] = 0;
}

static int evict_load_row(void *ctx, uint64_t tenant, uint64_t count, uint64_t bytes)
{
	struct evict_load *l = ctx;
	struct ofs_evict *e = &l->s->evict;
	char name[META_NAME_MAX + 1];
	struct ofs_tenant_evicted *t;
	uint64_t parent;
	size_t len;

	if (meta_name(l->s->meta, tenant, &parent, name, &len) || parent != META_ROOT_INO) {
		if (l->ngone < EVICT_GONE_MAX)
			l->gone[l->ngone++] = tenant;
		return 0;
	}
	if (e->ntev == OFS_EVICT_TENANTS)
		return 0;
	t = &e->tev[e->ntev++];
	t->ino = tenant;
	t->count = count;
	t->bytes = bytes;
	t->dirty = 0;
	evict_name(t->name, sizeof(t->name), name, len);
	return 0;
}

/* The per-tenant counts on record; those of tenants removed since are dropped.  Under s->lock. */
static void evict_load(struct ofs_store *s)
{
	struct evict_load *l = calloc(1, sizeof(*l));
	unsigned i;
	int ret;

	if (!l)
		return;
	l->s = s;
	ret = meta_tenant_evictions(s->meta, evict_load_row, l);
	if (ret)
		ofs_log("cannot read the per-tenant eviction counts: %s", strerror(-ret));
	if (!ret && l->ngone && !meta_begin(s->meta)) {
		for (i = 0; !ret && i < l->ngone; i++)
			ret = meta_tenant_evictions_drop(s->meta, l->gone[i]);
		if (!ret)
			ret = meta_commit(s->meta);
		else
			meta_rollback(s->meta);
	}
	free(l);
}

#define EVICT_LOOSE_BITS 13 /* ofs_evict.loose_slot: 8,192 slots, 192 KiB */

void ofs_evict_init(struct ofs_store *s, int on, unsigned high, unsigned low,
		    unsigned min_age_s)
{
	struct ofs_evict *e = &s->evict;
	pthread_condattr_t ca;

	pthread_mutex_init(&e->run, NULL);
	pthread_mutex_init(&e->wlock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->wcond, &ca);
	pthread_condattr_destroy(&ca);
	e->loose_slot = calloc(1u << EVICT_LOOSE_BITS, sizeof(*e->loose_slot));
	e->on = on;
	e->high = high;
	e->low = low;
	e->min_age_ns = (int64_t)min_age_s * 1000000000LL;
	pthread_mutex_lock(&s->lock);
	evict_load(s);
	pthread_mutex_unlock(&s->lock);
}

void ofs_evict_fini(struct ofs_store *s)
{
	struct ofs_evict *e = &s->evict;

	free(e->dirty);
	free(e->dirty_atime);
	free(e->loose_slot);
	free(e->set);
	e->dirty = NULL;
	e->dirty_atime = NULL;
	e->loose_slot = NULL;
	e->set = NULL;
	e->ndirty = e->dirty_cap = 0;
	e->nset = e->set_cap = 0;
}

#define EVICT_DAY_NS (86400LL * 1000000000LL)

/* Queue ino's atime for the next write of atimes: its slot, or -1 when out of memory. */
static ssize_t evict_queue(struct ofs_evict *e, uint64_t ino, int64_t atime)
{
	if (e->ndirty == e->dirty_cap) {
		size_t cap = e->dirty_cap ? 2 * e->dirty_cap : 256;
		uint64_t *d = realloc(e->dirty, cap * sizeof(*d));
		int64_t *a;

		if (d)
			e->dirty = d;
		a = d ? realloc(e->dirty_atime, cap * sizeof(*a)) : NULL;
		if (!a)
			return -1;
		e->dirty_atime = a;
		e->dirty_cap = cap;
	}
	e->dirty[e->ndirty] = ino;
	e->dirty_atime[e->ndirty] = atime;
	return (ssize_t)e->ndirty++;
}

/* ino's slot in e->loose_slot, or NULL when out of memory. */
static struct ofs_evict_loose *evict_loose_of(struct ofs_evict *e, uint64_t ino)
{
	return e->loose_slot ? &e->loose_slot[(ino * 0x9E3779B97F4A7C15ULL) >> (64 - EVICT_LOOSE_BITS)]
			     : NULL;
}

void ofs_evict_forget(struct ofs_store *s, const struct ofs_object *o)
{
	struct ofs_evict *e = &s->evict;
	struct ofs_evict_loose *l = evict_loose_of(e, o->m.ino);
	size_t i;

	/*
	 * A use from now on is queued after the object's uses, not into a
	 * slot queued before it was loaded: the last queued of an ino is its
	 * last use (evict_dedup), and a slot before a utimens takes the time
	 * set (evict_apply_sets).
	 */
	if (l && l->ino == o->m.ino)
		l->round = 0;
	/*
	 * Its queued uses would be written as they were, over a utimens
	 * made since: the time it was set to goes in their place, at the
	 * write of atimes (one pass for all such objects: many may leave at
	 * once, after a copy that set every file's times).
	 */
	if (o->atime_set_round != e->round + 1)
		return;
	if (e->nset == e->set_cap) {
		size_t cap = e->set_cap ? 2 * e->set_cap : 64;
		struct ofs_evict_set *v = realloc(e->set, cap * sizeof(*v));

		if (v) {
			e->set = v;
			e->set_cap = cap;
		}
	}
	if (e->nset < e->set_cap) {
		e->set[e->nset++] = (struct ofs_evict_set){ o->m.ino, o->m.atime, e->ndirty };
		return;
	}
	for (i = 0; i < e->ndirty; i++) /* out of memory: now */
		if (e->dirty[i] == o->m.ino)
			e->dirty_atime[i] = o->m.atime;
}

static int evict_set_cmp(const void *a, const void *b)
{
	const struct ofs_evict_set *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return (x->upto > y->upto) - (x->upto < y->upto);
}

/*
 * ofs_evict_forget's times over the uses queued before: an ino's last
 * departure (the latest time set) over every use queued before it.
 */
static void evict_apply_sets(struct ofs_evict *e)
{
	size_t i;

	qsort(e->set, e->nset, sizeof(*e->set), evict_set_cmp);
	for (i = 0; i < e->ndirty; i++) {
		size_t lo = 0, hi = e->nset;

		while (lo < hi) { /* the first entry past this ino's */
			size_t mid = lo + (hi - lo) / 2;

			if (e->set[mid].ino <= e->dirty[i])
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo && e->set[lo - 1].ino == e->dirty[i] && i < e->set[lo - 1].upto)
			e->dirty_atime[i] = e->set[lo - 1].atime;
	}
	e->nset = 0;
}

/* ofs_evict_touch at time now. */
static int evict_touch_at(struct ofs_store *s, struct ofs_object *o, int64_t now)
{
	struct ofs_evict *e = &s->evict;
	int shown = o->m.atime <= o->m.mtime || o->m.atime <= o->m.ctime ||
		    now - o->m.atime >= EVICT_DAY_NS;
	ssize_t slot;

	o->m.atime = now;
	/* A hot object opened many times a tick is written once. */
	if (o->atime_round == e->round + 1) {
		e->dirty_atime[o->atime_slot] = now;
		return shown;
	}
	slot = evict_queue(e, o->m.ino, now);
	if (slot < 0)
		return shown; /* kept in memory only: written with the next record change */
	o->atime_round = e->round + 1;
	o->atime_slot = (size_t)slot;
	return shown;
}

int ofs_evict_touch(struct ofs_store *s, struct ofs_object *o)
{
	return evict_touch_at(s, o, ofs_now());
}

int ofs_evict_touch_ino(struct ofs_store *s, uint64_t ino, int64_t now)
{
	struct ofs_evict *e = &s->evict;
	struct ofs_object *o = ofs_object_find(s, ino);
	struct ofs_evict_loose *l;
	ssize_t slot;

	if (o)
		return evict_touch_at(s, o, now);
	/* No object: nothing the kernel caches to drop; the record takes the time. */
	l = evict_loose_of(e, ino);
	if (l && l->round == e->round + 1 && l->ino == ino && l->slot < e->ndirty &&
	    e->dirty[l->slot] == ino) {
		e->dirty_atime[l->slot] = now;
		return 0;
	}
	slot = evict_queue(e, ino, now);
	if (slot < 0)
		return 0;
	e->loose = 1;
	if (l) {
		l->ino = ino;
		l->round = e->round + 1;
		l->slot = (size_t)slot;
	}
	return 0;
}

struct evict_dirty {
	uint64_t ino;
	int64_t atime;
	size_t at; /* its slot: the order of the uses */
};

static int evict_dirty_cmp(const void *a, const void *b)
{
	const struct evict_dirty *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return (x->at < y->at) - (x->at > y->at); /* the last queued first */
}

/*
 * Objects used without being in memory (batch lookups) may be queued many
 * times a tick: keep each ino once, at its last use.  That is the last
 * queued, not the largest time: a use after a utimens to the future ends
 * at the use's time, as an open would.  Under s->lock.
 */
static void evict_dedup(struct ofs_evict *e)
{
	struct evict_dirty *v = malloc(e->ndirty * sizeof(*v));
	size_t i, n = 0;

	if (!v)
		return; /* written as queued: the same rows more than once */
	for (i = 0; i < e->ndirty; i++) {
		v[i].ino = e->dirty[i];
		v[i].atime = e->dirty_atime[i];
		v[i].at = i;
	}
	qsort(v, e->ndirty, sizeof(*v), evict_dirty_cmp);
	for (i = 0; i < e->ndirty; i++) {
		if (n && v[i].ino == e->dirty[n - 1])
			continue;
		e->dirty[n] = v[i].ino;
		e->dirty_atime[n++] = v[i].atime;
	}
	e->ndirty = n;
	free(v);
}

/* The changed per-tenant counts, in the caller's transaction.  Under s->lock. */
static int evict_write_counts(struct ofs_store *s)
{
	struct ofs_evict *e = &s->evict;
	unsigned i;
	int ret = 0;

	for (i = 0; !ret && i < e->ntev; i++)
		if (e->tev[i].dirty)
			ret = meta_tenant_evictions_set(s->meta, e->tev[i].ino, e->tev[i].count,
							e->tev[i].bytes);
	return ret;
}

/* The queued atimes and the changed per-tenant counts, in one transaction.  Under s->lock. */
static int evict_write(struct ofs_store *s)
{
	struct ofs_evict *e = &s->evict;
	int ret = meta_begin(s->meta);

	if (!ret && e->ndirty)
		ret = meta_set_atimes(s->meta, e->dirty, e->dirty_atime, e->ndirty);
	if (!ret)
		ret = evict_write_counts(s);
	if (!ret)
		ret = meta_commit(s->meta);
	else
		meta_rollback(s->meta);
	return ret;
}

int ofs_evict_flush(struct ofs_store *s)
{
	struct ofs_evict *e = &s->evict;
	size_t i;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	if (e->tev_dirty && !e->ndirty) {
		ret = evict_write(s);
		if (ret)
			ofs_log("cannot record the per-tenant eviction counts: %s", strerror(-ret));
	}
	if (e->nset)
		evict_apply_sets(e);
	if (e->ndirty) {
		/*
		 * The object's own atime wins: a utimens may have set it since.
		 * An object queued by a use that found it out of memory, or by
		 * an earlier object of its ino, and loaded since holds the
		 * record's time from before those uses: the uses win, the last
		 * queued last, whatever the times (the record's may be a
		 * utimens to the future), unless a utimens has set it since.
		 */
		for (i = 0; i < e->ndirty; i++) {
			struct ofs_object *o = ofs_object_find(s, e->dirty[i]);

			if (!o)
				continue;
			if (o->atime_round != e->round + 1 && o->atime_set_round != e->round + 1 &&
			    o->m.atime != e->dirty_atime[i]) {
				o->m.atime = e->dirty_atime[i];
				if (e->moved)
					e->moved(e->gone_arg, o->m.ino);
			}
			e->dirty_atime[i] = o->m.atime;
		}
		if (e->loose)
			evict_dedup(e);
		e->loose = 0;
		ret = evict_write(s);
		if (ret)
			ofs_log("cannot record the last use of %zu objects: %s", e->ndirty,
				strerror(-ret));
		e->ndirty = 0;
		e->round++;
	}
	/* Counted after their evictions committed: on record never more than those. */
	if (!ret && e->tev_dirty) {
		for (i = 0; i < e->ntev; i++)
			e->tev[i].dirty = 0;
		e->tev_dirty = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

struct evict_rows {
	struct meta_inode rows[EVICT_BATCH];
	unsigned n;
};

static int evict_row(void *ctx, const struct meta_inode *in)
{
	struct evict_rows *r = ctx;

	r->rows[r->n++] = *in;
	return 0;
}

/*
 * The slot of ino's tenant in the table of evictions by tenant (added
 * when there is room), or -1.  Under s->lock.
 */
static int evict_tenant_slot(struct ofs_store *s, uint64_t ino)
{
	struct ofs_evict *e = &s->evict;
	char key[OFS_KEY_MAX + 1];
	uint64_t tenant, parent;
	size_t klen;
	unsigned i;

	if (meta_path(s->meta, ino, 0, key, sizeof(key), &klen, &tenant) || !tenant ||
	    tenant == ino)
		return -1; /* not below a tenant directory */
	for (i = 0; i < e->ntev && e->tev[i].ino != tenant; i++)
		;
	if (i == e->ntev) {
		struct ofs_tenant_evicted *t = &e->tev[i];
		char name[META_NAME_MAX + 1];
		size_t len;

		if (i == OFS_EVICT_TENANTS || meta_name(s->meta, tenant, &parent, name, &len))
			return -1;
		evict_name(t->name, sizeof(t->name), name, len);
		t->ino = tenant;
		t->count = t->bytes = 0;
		t->dirty = 0;
		e->ntev++;
	}
	return (int)i;
}

int ofs_evict_tenant_counts(struct ofs_store *s, struct ofs_tenant_evicted *t, int max)
{
	int n;

	pthread_mutex_lock(&s->lock);
	n = (int)s->evict.ntev < max ? (int)s->evict.ntev : max;
	memcpy(t, s->evict.tev, (size_t)n * sizeof(*t));
	pthread_mutex_unlock(&s->lock);
	return n;
}

/*
 * m, whose record the store holds under its lock, may go; one younger
 * than min_age only when young.  Under s->lock.
 */
static int evict_allowed(struct ofs_store *s, const struct meta_inode *m, uint64_t tenant,
			 int64_t now, int young)
{
	struct ofs_object *o = ofs_object_find(s, m->ino);
	const struct meta_inode *cur = o ? &o->m : m;
	int64_t last = cur->atime;
	char key[OFS_KEY_MAX + 1];
	size_t klen;
	uint64_t t;

	if (o && (o->nopen || o->obj || o->unlinked))
		return 0;
	if (!S_ISREG(cur->mode) || cur->state != META_COMMITTED)
		return 0;
	if (cur->mtime > last)
		last = cur->mtime;
	if (cur->ctime > last)
		last = cur->ctime;
	if (!young && now - last < s->evict.min_age_ns)
		return 0;
	if (meta_xattr_get(s->meta, m->ino, OFS_PIN_XATTR, NULL, 0) != -ENODATA)
		return 0;
	if (tenant && (meta_path(s->meta, m->ino, 0, key, sizeof(key), &klen, &t) || t != tenant))
		return 0;
	return 1;
}

/*
 * One sweep of the candidates in order of use, until done reaches need:
 * those past min_age only, or (young) any.  Under e->run.
 */
static uint64_t evict_sweep(struct ofs_store *s, struct evict_rows *r, uint64_t need,
			    uint64_t done, uint64_t tenant, int young, uint64_t *count)
{
	struct ofs_evict *e = &s->evict;
	int64_t after_atime = INT64_MIN;
	uint64_t after_ino = 0;
	int ret = 0;

	while (done < need && !ret) {
		int64_t now = ofs_now();
		unsigned i;

		r->n = 0;
		pthread_mutex_lock(&s->lock);
		ret = meta_lru(s->meta, after_atime, after_ino,
			       young ? INT64_MAX : now - e->min_age_ns + 1, EVICT_BATCH, evict_row,
			       r);
		for (i = 0; !ret && i < r->n && done < need; i++) {
			const struct meta_inode *m = &r->rows[i];
			char name[META_NAME_MAX + 1];
			uint64_t parent, bytes;
			size_t len;
			int slot;

			after_atime = m->atime;
			after_ino = m->ino;
			if (!evict_allowed(s, m, tenant, now, young) ||
			    meta_name(s->meta, m->ino, &parent, name, &len))
				continue;
			bytes = m->npages ? m->npages * s->geom.page_size : m->size;
			/* Its tenant is known only while the name is there. */
			slot = evict_tenant_slot(s, m->ino);
			/* As an unlink: one transaction, the pages freed at the next barrier. */
			if (ofs_ns_drop(s, m))
				continue;
			if (slot >= 0) {
				e->tev[slot].count++;
				e->tev[slot].bytes += bytes;
				e->tev[slot].dirty = e->tev_dirty = 1;
			}
			done += bytes;
			(*count)++;
			if (e->gone)
				e->gone(e->gone_arg, parent, name, len);
		}
		pthread_mutex_unlock(&s->lock);
		if (r->n < EVICT_BATCH)
			break;
	}
	if (ret)
		ofs_log("eviction: cannot read the candidates: %s", strerror(-ret));
	return done;
}

/*
 * ofs_evict; with young, objects younger than min_age go too when the
 * older ones do not free need: a writer that finds no room gets it while
 * the store holds anything closed and unpinned.  min_age orders, the old
 * first, so a burst of writes keeps what it just wrote as long as it can.
 */
static uint64_t evict_run(struct ofs_store *s, uint64_t need, uint64_t tenant,
			  enum ofs_evict_reason reason, int young)
{
	struct ofs_evict *e = &s->evict;
	struct evict_rows *r = malloc(sizeof(*r));
	uint64_t done, count = 0;

	if (!r)
		return 0;
	pthread_mutex_lock(&e->run);
	/* The order on record is the order of use. */
	(void)ofs_evict_flush(s);
	done = evict_sweep(s, r, need, 0, tenant, 0, &count);
	if (young && done < need)
		done = evict_sweep(s, r, need, done, tenant, 1, &count);
	pthread_mutex_unlock(&e->run);
	free(r);
	if (count) {
		OFS_COUNT(e->evictions[reason], count);
		OFS_COUNT(e->evicted_bytes, done);
		(void)ofs_store_barrier(s, NULL);
	}
	return done;
}

uint64_t ofs_evict(struct ofs_store *s, uint64_t need, uint64_t tenant,
		   enum ofs_evict_reason reason)
{
	return evict_run(s, need, tenant, reason, 0);
}

/* Bytes above pct percent of the capacity statfs reports; 0 when below. */
static uint64_t evict_over(struct ofs_store *s, unsigned pct)
{
	struct kvb_statfs ks = { 0 };
	uint64_t cap, used, mark;

	if (kvb_statfs(&s->kvb, &ks) || !ks.blocks)
		return 0;
	cap = ks.blocks * ks.block_size;
	used = (ks.blocks - (ks.blocks_free < ks.blocks ? ks.blocks_free : ks.blocks)) *
	       ks.block_size;
	/* Rounded up, so evict_high=100 is the capacity itself: only a write
	 * that finds no room asks for a pass. */
	mark = cap / 100 * pct + (cap % 100 * pct + 99) / 100;
	return used > mark ? used - mark : 0;
}

struct evict_tenants {
	struct ofs_tenant_use *t;
	int n, max;
};

static int evict_tenant_row(void *ctx, uint64_t ino, const char *name, size_t len,
			    const char *value, size_t vlen)
{
	struct evict_tenants *et = ctx;
	struct ofs_tenant_use *t;
	char buf[32];
	uint64_t quota;

	if (et->n == et->max || vlen == 0 || vlen >= sizeof(buf))
		return 0;
	memcpy(buf, value, vlen);
	buf[vlen] = 0;
	if (ofs_parse_size(buf, &quota) || quota == 0)
		return 0; /* not a size, or no limit */
	t = &et->t[et->n++];
	t->ino = ino;
	t->quota = quota;
	t->used = 0;
	evict_name(t->name, sizeof(t->name), name, len);
	return 0;
}

int ofs_evict_tenants(struct ofs_store *s, struct ofs_tenant_use *t, int max)
{
	struct evict_tenants et = { t, 0, max };
	uint64_t pages;
	int i;

	pthread_mutex_lock(&s->lock);
	if (meta_tenant_xattrs(s->meta, OFS_QUOTA_XATTR, evict_tenant_row, &et))
		et.n = 0;
	for (i = 0; i < et.n; i++)
		if (meta_tenant_pages(s->meta, t[i].ino, &pages) == 0)
			t[i].used = pages * s->geom.page_size;
	pthread_mutex_unlock(&s->lock);
	return et.n;
}

#define EVICT_TENANTS_MAX 256

/*
 * Evict from each tenant over its quota down to it, and from each tenant
 * of a writer waiting for room (want, n) that the writer's bytes would
 * take past it: its usage plus those bytes down to the quota.  A tenant
 * sitting at its quota holds no more than its share, yet its next file
 * is over it: the room comes from its own files, never another tenant's.
 * young: as evict_run's.
 */
static uint64_t evict_quotas(struct ofs_store *s, const struct ofs_evict_want *want, unsigned nw,
			     int young)
{
	struct ofs_tenant_use *t = malloc(EVICT_TENANTS_MAX * sizeof(*t));
	uint64_t done = 0;
	unsigned k;
	int i, n;

	if (!t)
		return 0;
	n = ofs_evict_tenants(s, t, EVICT_TENANTS_MAX);
	for (i = 0; i < n; i++) {
		uint64_t use = t[i].used;

		for (k = 0; k < nw; k++)
			if (want[k].tenant == t[i].ino)
				use += want[k].bytes;
		if (use > t[i].quota)
			done += evict_run(s, use - t[i].quota, t[i].ino, OFS_EVICT_QUOTA, young);
	}
	free(t);
	return done;
}

uint64_t ofs_evict_quotas(struct ofs_store *s)
{
	return evict_quotas(s, NULL, 0, 0);
}

/* Eviction off: note the tenants' usage against their quotas (ofs_evict_quota_check). */
static void evict_note_quotas(struct ofs_store *s)
{
	struct ofs_tenant_use *t = malloc(EVICT_TENANTS_MAX * sizeof(*t));
	struct ofs_evict *e = &s->evict;
	unsigned nq = 0;
	int i, n;

	if (!t)
		return;
	n = ofs_evict_tenants(s, t, EVICT_TENANTS_MAX);
	pthread_mutex_lock(&s->lock);
	for (i = 0; i < n && nq < 64; i++) {
		e->quotas[nq].ino = t[i].ino;
		e->quotas[nq].quota = t[i].quota;
		e->quotas[nq++].used = t[i].used;
	}
	e->nquotas = nq;
	pthread_mutex_unlock(&s->lock);
	free(t);
}

/* The quota entry of ino's tenant, or NULL.  Under s->lock. */
static struct ofs_tenant_quota *evict_quota_of(struct ofs_store *s, uint64_t tenant)
{
	unsigned i;

	for (i = 0; i < s->evict.nquotas; i++)
		if (s->evict.quotas[i].ino == tenant)
			return &s->evict.quotas[i];
	return NULL;
}

int ofs_evict_quota_check(struct ofs_store *s, uint64_t ino)
{
	char key[OFS_KEY_MAX + 1];
	struct ofs_tenant_quota *q;
	uint64_t tenant = 0;
	size_t klen;

	if (!s->evict.nquotas || meta_path(s->meta, ino, 0, key, sizeof(key), &klen, &tenant))
		return 0;
	q = evict_quota_of(s, tenant);
	return q && q->used >= q->quota ? -EDQUOT : 0;
}

/* Charge grow bytes to tenant (0: none): -EDQUOT past its quota.  Under s->lock. */
static int evict_quota_charge(struct ofs_store *s, uint64_t tenant, uint64_t grow)
{
	struct ofs_tenant_quota *q = tenant ? evict_quota_of(s, tenant) : NULL;

	if (q && q->used + grow > q->quota)
		return -EDQUOT;
	if (q)
		q->used += grow;
	return 0;
}

int ofs_evict_quota_write(struct ofs_store *s, struct ofs_object *o, uint64_t grow)
{
	char key[OFS_KEY_MAX + 1];
	size_t klen;
	int ret;

	if (s->evict.on || !grow)
		return 0;
	pthread_mutex_lock(&s->lock);
	if (s->evict.nquotas && !o->tenant &&
	    meta_path(s->meta, o->m.ino, 0, key, sizeof(key), &klen, &o->tenant))
		o->tenant = 0; /* unlinked: no tenant to charge */
	ret = evict_quota_charge(s, o->tenant, grow);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int ofs_evict_quota_reserve(struct ofs_store *s, uint64_t tenant, uint64_t size)
{
	uint64_t ps = s->geom.page_size;
	int ret;

	if (s->evict.on || !size)
		return 0;
	pthread_mutex_lock(&s->lock);
	ret = evict_quota_charge(s, tenant, (size + ps - 1) / ps * ps);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* Quota passes a watermark pass runs at most before it ends (ofs_evict_tick). */
#define EVICT_QUOTA_ROUNDS 4

uint64_t ofs_evict_tick(struct ofs_store *s)
{
	uint64_t done, q;
	unsigned round;

	if (!s->evict.on) {
		evict_note_quotas(s);
		return 0;
	}
	/* Tenants over their quota first: they never push out the others. */
	done = q = ofs_evict_quotas(s);
	/*
	 * Writers go on during that pass: one may have taken its tenant past
	 * the quota again, and the store above the watermark with it.  Those
	 * tenants give first again, by their usage of now; the least recently
	 * used go only after a quotas pass with nothing to give.  A few rounds
	 * at most: a worker whose pass freed something runs again at once
	 * while above the watermark, the syncer at its next tick.
	 */
	for (round = 0; q && round < EVICT_QUOTA_ROUNDS && evict_over(s, s->evict.high); round++)
		done += q = ofs_evict_quotas(s);
	if (!q && evict_over(s, s->evict.high))
		done += ofs_evict(s, evict_over(s, s->evict.low), 0, OFS_EVICT_WATERMARK);
	return done;
}

/*
 * Room for the writers waiting (want, nw: their tenants): the barrier
 * that releases what deletes freed (enough when it brings usage below
 * the high watermark), else tenants over their quota or that a writer
 * would take past it, else the least recently used down to the low
 * watermark, at least the band between the two; objects younger than
 * min_age after the others.  1 when something was released or freed.
 */
static int evict_for_room(struct ofs_store *s, const struct ofs_evict_want *want, unsigned nw)
{
	struct kvb_statfs ks = { 0 };
	uint64_t need, band, released = 0;

	if (ofs_store_barrier(s, &released) == 0 && released > 0 && !evict_over(s, s->evict.high))
		return 1;
	if (kvb_statfs(&s->kvb, &ks))
		return released > 0;
	/* A writer found no room: objects younger than min_age yield. */
	if (evict_quotas(s, want, nw, 1))
		return 1;
	band = ks.blocks * ks.block_size / 100 * (s->evict.high - s->evict.low);
	need = evict_over(s, s->evict.low);
	if (need < band)
		need = band;
	if (need < ks.block_size)
		need = ks.block_size;
	return evict_run(s, need, 0, OFS_EVICT_PUT, 1) > 0 || released > 0;
}

static int64_t evict_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Note a waiting writer's tenant and bytes for the next put pass.  Under e->wlock. */
static void evict_want(struct ofs_evict *e, uint64_t tenant, uint64_t bytes)
{
	unsigned k;

	if (!tenant)
		return;
	for (k = 0; k < e->nwant && e->want[k].tenant != tenant; k++)
		;
	if (k == e->nwant) {
		if (k == OFS_EVICT_WANTS)
			return;
		e->want[e->nwant++] = (struct ofs_evict_want){ tenant, 0 };
	}
	e->want[k].bytes += bytes;
}

int ofs_evict_for_put(struct ofs_store *s, uint64_t tenant, uint64_t bytes)
{
	uint64_t ps = s->geom.page_size;
	struct ofs_evict_want one = { tenant, (bytes + ps - 1) / ps * ps }; /* usage is in pages */
	struct ofs_evict *e = &s->evict;
	uint64_t end;
	int room = -1;

	if (!e->on)
		return 0;
	pthread_mutex_lock(&e->wlock);
	/* A pass under way may free what this write needs: its end first. */
	if (e->worker && e->busy) {
		end = e->passes + 1;
		while (e->worker && e->passes < end)
			pthread_cond_wait(&e->wcond, &e->wlock);
		if (e->passes >= end && e->room_pass >= end) {
			pthread_mutex_unlock(&e->wlock);
			OFS_COUNT(e->put_waits, 1);
			return 1;
		}
	}
	if (e->worker) {
		/* One pass for all the writers waiting: after the one under way, if any. */
		end = e->passes + 1 + (e->busy ? 1 : 0);
		evict_want(e, one.tenant, one.bytes);
		e->wanted = e->put_wanted = 1;
		pthread_cond_broadcast(&e->wcond);
		while (e->worker && e->passes < end)
			pthread_cond_wait(&e->wcond, &e->wlock);
		if (e->passes >= end)
			room = e->room_pass >= end;
	}
	pthread_mutex_unlock(&e->wlock);
	if (room >= 0) {
		OFS_COUNT(e->put_waits, 1);
		return room;
	}
	return evict_for_room(s, &one, tenant ? 1 : 0); /* no worker (or it stopped): here */
}

void ofs_evict_poke(struct ofs_store *s)
{
	struct ofs_evict *e = &s->evict;
	int idle;

	if (!e->on)
		return;
	pthread_mutex_lock(&e->wlock);
	idle = e->worker && !e->wanted && !e->busy && evict_mono_ns() >= e->quiet_until;
	pthread_mutex_unlock(&e->wlock);
	/* statfs outside the lock: the backend's locks are not nested in it. */
	if (!idle || !evict_over(s, e->high))
		return;
	pthread_mutex_lock(&e->wlock);
	if (!e->wanted && !e->busy) {
		e->wanted = 1;
		pthread_cond_broadcast(&e->wcond);
	}
	pthread_mutex_unlock(&e->wlock);
}

void ofs_evict_worker(struct ofs_store *s, unsigned tick_ms)
{
	struct ofs_evict *e = &s->evict;
	int64_t tick_ns = (int64_t)tick_ms * 1000000LL, next = evict_mono_ns() + tick_ns;

	pthread_mutex_lock(&e->wlock);
	e->worker = 1;
	while (!e->stop) {
		struct ofs_evict_want want[OFS_EVICT_WANTS];
		int put, room, tried, again = 0;
		unsigned nw = 0;
		int64_t now = evict_mono_ns();

		if (now >= next) {
			next = now + tick_ns;
		} else if (!e->wanted) {
			struct timespec ts = { next / 1000000000LL, next % 1000000000LL };

			pthread_cond_timedwait(&e->wcond, &e->wlock, &ts);
			continue;
		}
		put = e->put_wanted;
		if (put) {
			/* The writers waiting now; those coming during the pass wait for the next. */
			nw = e->nwant;
			memcpy(want, e->want, nw * sizeof(*want));
			e->nwant = 0;
		}
		e->wanted = e->put_wanted = 0;
		e->busy = 1;
		pthread_mutex_unlock(&e->wlock);
		/* The tick's pass notes the quotas with eviction off, too. */
		tried = put || (e->on && evict_over(s, e->high));
		room = put ? evict_for_room(s, want, nw) : ofs_evict_tick(s) > 0;
		/* Still above the high watermark (writers outran the pass): again at once. */
		if (room && e->on && evict_over(s, e->high))
			again = 1;
		pthread_mutex_lock(&e->wlock);
		e->busy = 0;
		e->passes++;
		if (room)
			e->room_pass = e->passes;
		if (again)
			e->wanted = 1;
		else if (tried && !room)
			e->quiet_until = evict_mono_ns() + tick_ns;
		pthread_cond_broadcast(&e->wcond);
	}
	e->worker = 0;
	pthread_cond_broadcast(&e->wcond);
	pthread_mutex_unlock(&e->wlock);
}

void ofs_evict_worker_stop(struct ofs_store *s)
{
	struct ofs_evict *e = &s->evict;

	pthread_mutex_lock(&e->wlock);
	e->stop = 1;
	pthread_cond_broadcast(&e->wcond);
	pthread_mutex_unlock(&e->wlock);
}
