/*
 * evict.c: recency (atimes set at open, written in batches) and LRU
 * eviction by unlink.  See evict.h.
 */
#include "evict.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ns.h"
#include "object.h"

const char *const ofs_evict_reason_name[OFS_EVICT_NREASONS] = { "watermark", "put", "quota",
								"manual" };

/* Candidates read per query, under the store's lock. */
#define EVICT_BATCH 64

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
	e->on = on;
	e->high = high;
	e->low = low;
	e->min_age_ns = (int64_t)min_age_s * 1000000000LL;
}

void ofs_evict_fini(struct ofs_store *s)
{
	struct ofs_evict *e = &s->evict;

	free(e->dirty);
	free(e->dirty_atime);
	e->dirty = NULL;
	e->dirty_atime = NULL;
	e->ndirty = e->dirty_cap = 0;
}

#define EVICT_DAY_NS (86400LL * 1000000000LL)

int ofs_evict_touch(struct ofs_store *s, struct ofs_object *o)
{
	struct ofs_evict *e = &s->evict;
	int64_t now = ofs_now();
	int shown = o->m.atime <= o->m.mtime || o->m.atime <= o->m.ctime ||
		    now - o->m.atime >= EVICT_DAY_NS;

	o->m.atime = now;
	/* A hot object opened many times a tick is written once. */
	if (o->atime_round == e->round + 1) {
		e->dirty_atime[o->atime_slot] = now;
		return shown;
	}
	if (e->ndirty == e->dirty_cap) {
		size_t cap = e->dirty_cap ? 2 * e->dirty_cap : 256;
		uint64_t *d = realloc(e->dirty, cap * sizeof(*d));
		int64_t *a;

		if (d)
			e->dirty = d;
		a = d ? realloc(e->dirty_atime, cap * sizeof(*a)) : NULL;
		if (!a)
			return shown; /* kept in memory only: written with the next record change */
		e->dirty_atime = a;
		e->dirty_cap = cap;
	}
	o->atime_round = e->round + 1;
	o->atime_slot = e->ndirty;
	e->dirty[e->ndirty] = o->m.ino;
	e->dirty_atime[e->ndirty++] = o->m.atime;
	return shown;
}

int ofs_evict_flush(struct ofs_store *s)
{
	struct ofs_evict *e = &s->evict;
	size_t i;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	if (e->ndirty) {
		/* The object's own atime wins: a utimens may have set it since. */
		for (i = 0; i < e->ndirty; i++) {
			struct ofs_object *o = ofs_object_find(s, e->dirty[i]);

			if (o)
				e->dirty_atime[i] = o->m.atime;
		}
		ret = meta_begin(s->meta);
		if (!ret) {
			ret = meta_set_atimes(s->meta, e->dirty, e->dirty_atime, e->ndirty);
			if (!ret)
				ret = meta_commit(s->meta);
			else
				meta_rollback(s->meta);
		}
		if (ret)
			ofs_log("cannot record the last use of %zu objects: %s", e->ndirty,
				strerror(-ret));
		e->ndirty = 0;
		e->round++;
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
		if (len >= sizeof(t->name))
			len = sizeof(t->name) - 1;
		memcpy(t->name, name, len);
		t->name[len] = 0;
		t->ino = tenant;
		t->count = t->bytes = 0;
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

/* m, whose record the store holds under its lock, may go.  Under s->lock. */
static int evict_allowed(struct ofs_store *s, const struct meta_inode *m, uint64_t tenant,
			 int64_t now)
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
	if (now - last < s->evict.min_age_ns)
		return 0;
	if (meta_xattr_get(s->meta, m->ino, OFS_PIN_XATTR, NULL, 0) != -ENODATA)
		return 0;
	if (tenant && (meta_path(s->meta, m->ino, 0, key, sizeof(key), &klen, &t) || t != tenant))
		return 0;
	return 1;
}

uint64_t ofs_evict(struct ofs_store *s, uint64_t need, uint64_t tenant,
		   enum ofs_evict_reason reason)
{
	struct ofs_evict *e = &s->evict;
	struct evict_rows *r = malloc(sizeof(*r));
	int64_t after_atime = INT64_MIN;
	uint64_t after_ino = 0, done = 0, count = 0;
	int ret = 0;

	if (!r)
		return 0;
	pthread_mutex_lock(&e->run);
	/* The order on record is the order of use. */
	(void)ofs_evict_flush(s);
	while (done < need && !ret) {
		int64_t now = ofs_now();
		unsigned i;

		r->n = 0;
		pthread_mutex_lock(&s->lock);
		ret = meta_lru(s->meta, after_atime, after_ino, EVICT_BATCH, evict_row, r);
		for (i = 0; !ret && i < r->n && done < need; i++) {
			const struct meta_inode *m = &r->rows[i];
			char name[META_NAME_MAX + 1];
			uint64_t parent, bytes;
			size_t len;
			int slot;

			after_atime = m->atime;
			after_ino = m->ino;
			if (!evict_allowed(s, m, tenant, now) ||
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
			}
			done += bytes;
			count++;
			if (e->gone)
				e->gone(e->gone_arg, parent, name, len);
		}
		pthread_mutex_unlock(&s->lock);
		if (r->n < EVICT_BATCH)
			break;
	}
	pthread_mutex_unlock(&e->run);
	free(r);
	if (ret)
		ofs_log("eviction: cannot read the candidates: %s", strerror(-ret));
	if (count) {
		OFS_COUNT(e->evictions[reason], count);
		OFS_COUNT(e->evicted_bytes, done);
		(void)ofs_store_barrier(s, NULL);
	}
	return done;
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
	mark = cap / 100 * pct;
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
	if (len >= sizeof(t->name))
		len = sizeof(t->name) - 1;
	memcpy(t->name, name, len);
	t->name[len] = 0;
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

uint64_t ofs_evict_quotas(struct ofs_store *s)
{
	struct ofs_tenant_use *t = malloc(EVICT_TENANTS_MAX * sizeof(*t));
	uint64_t done = 0;
	int i, n;

	if (!t)
		return 0;
	n = ofs_evict_tenants(s, t, EVICT_TENANTS_MAX);
	for (i = 0; i < n; i++)
		if (t[i].used > t[i].quota)
			done += ofs_evict(s, t[i].used - t[i].quota, t[i].ino, OFS_EVICT_QUOTA);
	free(t);
	return done;
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

int ofs_evict_quota_write(struct ofs_store *s, struct ofs_object *o, uint64_t grow)
{
	struct ofs_tenant_quota *q;
	char key[OFS_KEY_MAX + 1];
	size_t klen;
	int ret = 0;

	if (s->evict.on || !grow)
		return 0;
	pthread_mutex_lock(&s->lock);
	if (s->evict.nquotas && !o->tenant &&
	    meta_path(s->meta, o->m.ino, 0, key, sizeof(key), &klen, &o->tenant))
		o->tenant = 0; /* unlinked: no tenant to charge */
	q = o->tenant ? evict_quota_of(s, o->tenant) : NULL;
	if (q && q->used + grow > q->quota)
		ret = -EDQUOT;
	else if (q)
		q->used += grow;
	pthread_mutex_unlock(&s->lock);
	return ret;
}

uint64_t ofs_evict_tick(struct ofs_store *s)
{
	uint64_t done;

	if (!s->evict.on) {
		evict_note_quotas(s);
		return 0;
	}
	/* Tenants over their quota first: they never push out the others. */
	done = ofs_evict_quotas(s);
	if (evict_over(s, s->evict.high))
		done += ofs_evict(s, evict_over(s, s->evict.low), 0, OFS_EVICT_WATERMARK);
	return done;
}

/*
 * Room for a writer: the barrier that releases what deletes freed (enough
 * when it brings usage below the high watermark), else tenants over their
 * quota, else the least recently used down to the low watermark, at least
 * the band between the two.  1 when something was released or freed.
 */
static int evict_for_room(struct ofs_store *s)
{
	struct kvb_statfs ks = { 0 };
	uint64_t need, band, released = 0;

	if (ofs_store_barrier(s, &released) == 0 && released > 0 && !evict_over(s, s->evict.high))
		return 1;
	if (kvb_statfs(&s->kvb, &ks))
		return released > 0;
	if (ofs_evict_quotas(s))
		return 1;
	band = ks.blocks * ks.block_size / 100 * (s->evict.high - s->evict.low);
	need = evict_over(s, s->evict.low);
	if (need < band)
		need = band;
	if (need < ks.block_size)
		need = ks.block_size;
	return ofs_evict(s, need, 0, OFS_EVICT_PUT) > 0 || released > 0;
}

static int64_t evict_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int ofs_evict_for_put(struct ofs_store *s)
{
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
	return evict_for_room(s); /* no worker (or it stopped): here */
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
		int put, room, tried, again = 0;
		int64_t now = evict_mono_ns();

		if (now >= next) {
			next = now + tick_ns;
		} else if (!e->wanted) {
			struct timespec ts = { next / 1000000000LL, next % 1000000000LL };

			pthread_cond_timedwait(&e->wcond, &e->wlock, &ts);
			continue;
		}
		put = e->put_wanted;
		e->wanted = e->put_wanted = 0;
		e->busy = 1;
		pthread_mutex_unlock(&e->wlock);
		/* The tick's pass notes the quotas with eviction off, too. */
		tried = put || (e->on && evict_over(s, e->high));
		room = put ? evict_for_room(s) : ofs_evict_tick(s) > 0;
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
