/*
 * writer.c: a writer's working state in the pages backend, by the rules
 * told at the top of backend.c: a shared or a private run, the lazy copy
 * of a private run's pages from the old one, and commit.
 */
#include "pages_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int pages_shared(const struct kvb_obj *o)
{
	return o->w.bucket >= 0 && o->w.bucket == o->c.bucket && o->w.page == o->c.page;
}

/* Give back the working pages no committed mapping owns. */
static void pages_drop_working(struct pages *p, struct kvb_obj *o)
{
	if (o->w.bucket < 0)
		return;
	if (pages_shared(o)) {
		if (o->w.npages > o->c.npages)
			pages_free_run(p, o->w.bucket, o->w.page + o->c.npages,
				       o->w.npages - o->c.npages);
	} else {
		pages_free_run(p, o->w.bucket, o->w.page, o->w.npages);
	}
}

static int pages_filled(const struct kvb_obj *o, uint64_t pg)
{
	return (o->filled[pg / 64] >> (pg % 64)) & 1;
}

static void pages_mark_filled(struct kvb_obj *o, uint64_t pg)
{
	if (!pages_filled(o, pg)) {
		assert(o->unfilled > 0);
		o->filled[pg / 64] |= 1ULL << (pg % 64);
		o->unfilled--;
	}
}

static void pages_src_done(struct kvb_obj *o)
{
	free(o->filled);
	o->filled = NULL;
	o->src = KVB_MAP_EMPTY;
	o->unfilled = 0;
}

static int pages_bit(const uint64_t *bits, uint64_t pg)
{
	return (bits[pg / 64] >> (pg % 64)) & 1;
}

/* A spare run may be written: a barrier begun after the commit that superseded it is done. */
static int pages_epoch_passed(struct pages *p, uint64_t epoch)
{
	uint64_t done;

	pthread_mutex_lock(&p->flock);
	done = p->barriers_released;
	pthread_mutex_unlock(&p->flock);
	return done > epoch;
}

/* Free a spare run: at once if ready, else (a version a crash may still need) after a barrier. */
static void pages_free_spare(struct pages *p, const struct kvb_map *spare, uint64_t epoch)
{
	if (spare->bucket < 0)
		return;
	if (pages_epoch_passed(p, epoch))
		pages_free_run(p, spare->bucket, spare->page, spare->npages);
	else
		pages_free_later(p, spare->bucket, spare->page, spare->npages);
}

static void pages_parked_free(struct pages *p, struct pages_parked *e)
{
	pages_free_spare(p, &e->spare, e->epoch);
	free(e->stale);
}

/* ---- an open writer's spare: under park_lock, listed in p->spares ---- */

/*
 * Under park_lock: o's spare out of o and off the list, into *e (spare
 * EMPTY: none).  e->c is left empty: o's committed run is its own thread's.
 */
static void pages_spare_unlist(struct pages *p, struct kvb_obj *o, struct pages_parked *e)
{
	*e = (struct pages_parked){ KVB_MAP_EMPTY, o->spare, o->spare_stale, o->spare_n,
				    o->spare_epoch };
	if (o->spare.bucket >= 0) {
		if (o->sp_prev)
			o->sp_prev->sp_next = o->sp_next;
		else
			p->spares = o->sp_next;
		if (o->sp_next)
			o->sp_next->sp_prev = o->sp_prev;
		o->sp_next = o->sp_prev = NULL;
		p->spare_pages -= o->spare.npages;
		__atomic_sub_fetch(&p->nspares, 1, __ATOMIC_RELAXED);
	}
	o->spare = KVB_MAP_EMPTY;
	o->spare_stale = NULL;
}

/* Take o's spare out of o, beside o's committed run: to use, to give back, to park or free. */
static void pages_spare_detach(struct pages *p, struct kvb_obj *o, struct pages_parked *e)
{
	pthread_mutex_lock(&p->park_lock);
	pages_spare_unlist(p, o, e);
	pthread_mutex_unlock(&p->park_lock);
	e->c = o->c;
}

/* Give o (holding none) the spare of e, if any. */
static void pages_spare_attach(struct pages *p, struct kvb_obj *o, const struct pages_parked *e)
{
	if (e->spare.bucket < 0)
		return;
	pthread_mutex_lock(&p->park_lock);
	assert(o->spare.bucket < 0);
	o->spare = e->spare;
	o->spare_stale = e->stale;
	o->spare_n = e->n;
	o->spare_epoch = e->epoch;
	o->sp_prev = NULL;
	o->sp_next = p->spares;
	if (p->spares)
		p->spares->sp_prev = o;
	p->spares = o;
	p->spare_pages += e->spare.npages;
	__atomic_add_fetch(&p->nspares, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&p->park_lock);
}

static void pages_spare_drop(struct pages *p, struct kvb_obj *o)
{
	struct pages_parked e;

	pages_spare_detach(p, o, &e);
	pages_parked_free(p, &e);
}

/* ---- spare runs of closed writers ---- */

/*
 * Take out every parked spare kept beside committed run c's first page;
 * the one kept for exactly c goes to o when o is set, the others are freed.
 */
static void pages_park_take(struct pages *p, const struct kvb_map *c, struct kvb_obj *o)
{
	struct pages_parked out[PAGES_PARKED_MAX];
	unsigned i, nout = 0;

	pthread_mutex_lock(&p->park_lock);
	for (i = 0; i < p->nparked;) {
		struct pages_parked *e = &p->parked[i];

		if (e->c.bucket != c->bucket || e->c.page != c->page) {
			i++;
			continue;
		}
		p->parked_pages -= e->spare.npages;
		out[nout++] = *e;
		*e = p->parked[--p->nparked];
	}
	pthread_mutex_unlock(&p->park_lock);
	for (i = 0; i < nout; i++) {
		struct pages_parked *e = &out[i];

		if (o && e->c.npages == c->npages && e->c.size == c->size) {
			pages_spare_attach(p, o, e);
			o = NULL;
		} else {
			pages_parked_free(p, e);
		}
	}
}

/* Committed run c changes or goes: a spare kept for it says nothing of what comes next. */
void pages_park_forget(struct pages *p, const struct kvb_map *c)
{
	if (c->bucket >= 0)
		pages_park_take(p, c, NULL);
}

/* Free every parked spare (unmount, space running short). */
void pages_park_clear(struct pages *p)
{
	struct pages_parked out[PAGES_PARKED_MAX];
	unsigned i, n;

	pthread_mutex_lock(&p->park_lock);
	n = p->nparked;
	memcpy(out, p->parked, n * sizeof(*out));
	p->nparked = 0;
	p->parked_pages = 0;
	pthread_mutex_unlock(&p->park_lock);
	for (i = 0; i < n; i++)
		pages_parked_free(p, &out[i]);
}

/* Keep a closing writer's spare e for its committed run e->c, the oldest making room. */
static void pages_park(struct pages *p, struct pages_parked *e)
{
	struct pages_parked old[PAGES_PARKED_MAX];
	uint64_t limit = p->npages * p->nbuckets / PAGES_PARKED_SHARE;
	unsigned nold = 0, i;

	if (e->spare.npages > limit) {
		pages_parked_free(p, e);
		return;
	}
	pthread_mutex_lock(&p->park_lock);
	while (p->nparked && (p->nparked == PAGES_PARKED_MAX ||
			      p->parked_pages + e->spare.npages > limit)) {
		old[nold] = p->parked[0];
		p->parked_pages -= old[nold++].spare.npages;
		memmove(p->parked, p->parked + 1, --p->nparked * sizeof(*p->parked));
	}
	p->parked[p->nparked++] = *e;
	p->parked_pages += e->spare.npages;
	pthread_mutex_unlock(&p->park_lock);
	for (i = 0; i < nold; i++)
		pages_parked_free(p, &old[i]);
}

/* Free every spare run, parked or an open writer's (space running short). */
static void pages_spares_give_up(struct pages *p)
{
	struct pages_parked e;

	pages_park_clear(p);
	for (;;) {
		pthread_mutex_lock(&p->park_lock);
		if (!p->spares) {
			pthread_mutex_unlock(&p->park_lock);
			return;
		}
		pages_spare_unlist(p, p->spares, &e);
		pthread_mutex_unlock(&p->park_lock);
		pages_parked_free(p, &e);
	}
}

/*
 * A fresh run; short of space, every spare run (parked, this writer's,
 * other open writers') is given up first.  A spare not yet reusable goes
 * to the freed list, so the barrier the caller runs for room
 * (ofs_store_reclaim) releases it.
 */
static int pages_alloc_fresh(struct pages *p, struct kvb_obj *o, uint64_t n, struct kvb_map *out)
{
	int ret = pages_alloc_run(p, o->key, o->klen, n, out);

	if (ret == -ENOSPC && (__atomic_load_n(&p->nspares, __ATOMIC_RELAXED) ||
			       __atomic_load_n(&p->nparked, __ATOMIC_RELAXED))) {
		pages_spares_give_up(p);
		ret = pages_alloc_run(p, o->key, o->klen, n, out);
	}
	return ret;
}

/* Bytes [from, to) of the working state may no longer be c's. */
static void pages_mark_diff(struct pages *p, struct kvb_obj *o, uint64_t from, uint64_t to)
{
	uint64_t pg, last;

	/* A byte at or past c.size still changes c's last page if it shares it. */
	if (!o->diff_ok || to <= from || o->c.bucket < 0 ||
	    from / p->page_size >= pages_for(p, o->c.size))
		return;
	if (!o->diff) {
		o->diff_n = pages_for(p, o->c.size);
		o->diff = calloc((o->diff_n + 63) / 64, sizeof(*o->diff));
		if (!o->diff) {
			o->diff_ok = 0;
			return;
		}
	}
	last = (to - 1) / p->page_size;
	for (pg = from / p->page_size; pg <= last && pg < o->diff_n; pg++)
		o->diff[pg / 64] |= 1ULL << (pg % 64);
}

/* Copy the src bytes of pages [from, to) into the working run. */
static int pages_fill_range(struct pages *p, struct kvb_obj *o, uint64_t from, uint64_t to)
{
	uint64_t off = from * p->page_size, end = to * p->page_size;

	if (end > o->src.size)
		end = o->src.size;
	return off < end ? pages_copy_at(p, &o->src, &o->w, off, end - off) : 0;
}

/* Fill page pg from src unless the working run holds it already. */
static int pages_fill_page(struct pages *p, struct kvb_obj *o, uint64_t pg)
{
	int ret;

	if (o->src.bucket < 0 || pg >= pages_for(p, o->src.size) || pages_filled(o, pg))
		return 0;
	ret = pages_fill_range(p, o, pg, pg + 1);
	if (!ret)
		pages_mark_filled(o, pg);
	return ret;
}

/* Fill page pg before a write of [off, end) unless the write covers all its old bytes. */
static int pages_fill_partial(struct pages *p, struct kvb_obj *o, uint64_t pg, uint64_t off,
			      uint64_t end)
{
	uint64_t start = pg * p->page_size, stop = start + p->page_size;

	if (stop > o->src.size)
		stop = o->src.size;
	if (off <= start && end >= stop)
		return 0;
	return pages_fill_page(p, o, pg);
}

/* Fill every page still in src, a run of unfilled pages at a time; then src is done. */
/*
 * Fill pages [from, to) from src, where src is c and o->pcs holds c's
 * sums: a run of whole pages whose sums are a page of zeros' (zsum) is
 * read, and when it is zeros indeed it is zeroed in the working run
 * (blocks kept, no bytes written: a fallocated pool's pages never
 * written) rather than copied; the others are copied.  buf: a chunk.
 */
static int pages_fill_range_sums(struct pages *p, struct kvb_obj *o, uint64_t from, uint64_t to,
				 uint64_t zsum, char *buf)
{
	uint64_t ps = p->page_size, full = o->src.size / ps, max = PAGES_COPY_CHUNK / ps;
	int ret = 0;

	while (!ret && from < to) {
		int zero = from < full && o->pcs[from] == zsum;
		uint64_t end = from + 1, len;

		while (end < to && ((end < full && o->pcs[end] == zsum) == zero) &&
		       (!zero || end - from < max))
			end++;
		len = (end - from) * ps;
		if (zero) {
			ret = pages_read_all(p, (uint32_t)o->src.bucket, buf, (size_t)len,
					     pages_byte(p, &o->src, from * ps));
			if (!ret && buf[0] == 0 && !memcmp(buf, buf + 1, (size_t)len - 1)) {
				ret = io_zero(p, (uint32_t)o->w.bucket, pages_byte(p, &o->w, from * ps),
					      len);
				from = end;
				continue;
			}
		}
		if (!ret)
			ret = pages_fill_range(p, o, from, end);
		from = end;
	}
	return ret;
}

static int pages_fill_all(struct pages *p, struct kvb_obj *o)
{
	uint64_t n, pg = 0, zsum = 0;
	char *buf = NULL;
	int ret = 0;

	if (o->src.bucket < 0)
		return 0;
	n = pages_for(p, o->src.size);
	/* With c's sums, pages of zeros need not be copied. */
	if (o->pcs_c && o->pcs && p->page_size <= PAGES_COPY_CHUNK &&
	    o->src.bucket == o->c.bucket && o->src.page == o->c.page &&
	    o->src.size == o->c.size && (buf = calloc(1, PAGES_COPY_CHUNK)))
		zsum = XXH3_64bits(buf, (size_t)p->page_size);
	while (!ret && pg < n && o->unfilled) {
		uint64_t end;

		if (pages_filled(o, pg)) {
			pg++;
			continue;
		}
		for (end = pg; end < n && !pages_filled(o, end); end++)
			;
		ret = buf ? pages_fill_range_sums(p, o, pg, end, zsum, buf)
			  : pages_fill_range(p, o, pg, end);
		for (; !ret && pg < end; pg++)
			pages_mark_filled(o, pg);
	}
	free(buf);
	/*
	 * The running checksum stays valid: a filled page was never written,
	 * so it lies above the bytes hashed so far.
	 */
	if (!ret)
		pages_src_done(o);
	return ret;
}

/*
 * Move the working bytes [0, w.size) to a new private run of at least n
 * pages.  Used for copy-on-write and when a run cannot grow in place.
 */
static int pages_move(struct pages *p, struct kvb_obj *o, uint64_t n)
{
	struct kvb_map fresh = { 0 };
	int ret;

	ret = pages_alloc_fresh(p, o, n, &fresh);
	if (ret)
		return ret;
	if (o->w.bucket >= 0) {
		ret = pages_copy_at(p, &o->w, &fresh, 0, o->w.size);
		if (ret) {
			pages_free_run(p, fresh.bucket, fresh.page, fresh.npages);
			return ret;
		}
		pages_drop_working(p, o);
	}
	fresh.size = o->w.size;
	o->w = fresh;
	o->rewrite = 0;
	return 0;
}

/* Make the working run hold at least size bytes. */
static int pages_need(struct pages *p, struct kvb_obj *o, uint64_t size)
{
	uint64_t n = pages_for(p, size);
	int ret;

	if (size > p->bucket_size)
		return -EFBIG;
	if (n == 0 || (o->w.bucket >= 0 && o->w.npages >= n))
		return 0;
	if (o->w.bucket >= 0 && o->w.npages > 0 && pages_extend_run(p, &o->w, n) == 0)
		return 0;
	ret = pages_move(p, o, n);
	/* Short of room, the move gave up the spares: one may have stood right past the run. */
	if (ret == -ENOSPC && o->w.bucket >= 0 && o->w.npages > 0 &&
	    pages_extend_run(p, &o->w, n) == 0)
		ret = 0;
	return ret;
}

/*
 * Before modifying bytes below `from`: leave a shared run if they are
 * committed.  With lazy set, and a shared run that is exactly the committed
 * one (nothing appended in place), the new run starts unfilled (see the
 * top): the spare run when it is ready and large enough, holding every
 * page but its stale ones, else a fresh one; otherwise the bytes are
 * copied now.
 */
static int pages_cow(struct pages *p, struct kvb_obj *o, uint64_t from, uint64_t size, int lazy)
{
	struct kvb_map fresh = { 0 };
	struct pages_parked sp;
	uint64_t n, np, pg, unfilled;
	int ret;

	if (!pages_shared(o) || from >= o->c.size)
		return 0;
	n = pages_for(p, size > o->w.size ? size : o->w.size);
	np = pages_for(p, o->w.size);
	if (!lazy || o->w.npages != o->c.npages || np == 0)
		return pages_move(p, o, n ? n : 1);
	o->filled = calloc((np + 63) / 64, sizeof(*o->filled));
	if (!o->filled)
		return -ENOMEM;
	unfilled = np;
	pages_spare_detach(p, o, &sp);
	if (o->diff_ok && sp.spare.bucket >= 0 && sp.spare.npages >= n &&
	    pages_epoch_passed(p, sp.epoch)) {
		uint64_t cp = pages_for(p, o->c.size);

		fresh = sp.spare;
		/*
		 * The spare holds c's page unless c changed it (stale), or this
		 * writer did since (diff: an append in place into c's last page,
		 * a growth that zeroed its tail); pages past c's are the writer's.
		 */
		for (pg = 0; pg < np && pg < sp.n && pg < cp; pg++) {
			if ((!sp.stale || !pages_bit(sp.stale, pg)) &&
			    (!o->diff || !pages_bit(o->diff, pg))) {
				o->filled[pg / 64] |= 1ULL << (pg % 64);
				unfilled--;
			}
		}
		free(sp.stale);
		o->rewrite = 1;
	} else {
		pages_spare_attach(p, o, &sp);
		ret = pages_alloc_fresh(p, o, n, &fresh);
		if (ret) {
			free(o->filled);
			o->filled = NULL;
			return ret;
		}
	}
	o->src = o->w;
	o->unfilled = unfilled;
	fresh.size = o->w.size;
	o->w = fresh;
	if (!o->unfilled)
		pages_src_done(o);
	return 0;
}

static int pages_zero_range(struct pages *p, const struct kvb_map *w, uint64_t from, uint64_t to)
{
	if (to <= from)
		return 0;
	return io_zero(p, (uint32_t)w->bucket, pages_byte(p, w, from), to - from);
}

int pages_obj_open(void *arg, const struct kvb_map *c, const char *key, size_t klen,
		   struct kvb_obj **out)
{
	const char *slash = memchr(key, '/', klen);
	struct kvb_obj *o;

	/* The home bucket hashes the key below the tenant directory. */
	if (slash) {
		klen -= (size_t)(slash + 1 - key);
		key = slash + 1;
	}
	o = calloc(1, sizeof(*o) + klen + 1);
	if (!o)
		return -ENOMEM;
	if (hasher_init(&o->h)) {
		free(o);
		return -ENOMEM;
	}
	o->hash_ok = 1;
	o->c = *c;
	o->w = *c;
	o->src = KVB_MAP_EMPTY;
	o->spare = KVB_MAP_EMPTY;
	o->diff_ok = 1;
	pthread_mutex_init(&o->fill_lock, NULL);
	memcpy(o->key, key, klen);
	o->klen = klen;
	if (c->bucket >= 0)
		pages_park_take(arg, c, o);
	*out = o;
	return 0;
}

/* A write's bytes: in memory (buf), or at from_off of another run (a copy). */
struct pages_bytes {
	const void *buf;
	const struct kvb_map *from;
	uint64_t from_off;
};

static int pages_put_bytes(struct pages *p, const struct kvb_obj *o, const struct pages_bytes *d,
			   size_t len, uint64_t off)
{
	if (d->buf)
		return pages_write_all(p, (uint32_t)o->w.bucket, d->buf, len, pages_byte(p, &o->w, off));
	return pages_copy_range(p, d->from, d->from_off, &o->w, off, len);
}

static ssize_t pages_obj_put(struct pages *p, struct kvb_obj *o, const struct pages_bytes *d,
			     size_t len, uint64_t off)
{
	uint64_t end = off + len;
	int ret, lazy_start;

	if (len == 0)
		return 0;
	if (end < off || end > p->bucket_size)
		return -EFBIG;
	lazy_start = pages_shared(o);
	ret = pages_cow(p, o, off < o->w.size ? off : o->w.size, end, 1);
	lazy_start = lazy_start && !ret && o->src.bucket >= 0;
	if (!ret)
		ret = pages_need(p, o, end);
	if (!ret && off > o->w.size)
		ret = pages_zero_range(p, &o->w, o->w.size, off);
	/* Pages still in src that this write covers only in part: their old bytes first. */
	if (!ret && o->src.bucket >= 0)
		ret = pages_fill_partial(p, o, off / p->page_size, off, end);
	if (!ret && o->src.bucket >= 0)
		ret = pages_fill_partial(p, o, (end - 1) / p->page_size, off, end);
	if (!ret)
		ret = pages_put_bytes(p, o, d, len, off);
	/* The written bytes, and the zeros before them, are no longer c's. */
	if (ret)
		o->diff_ok = 0;
	else
		pages_mark_diff(p, o, off < o->w.size ? off : o->w.size, end);
	if (!ret && o->rewrite && len >= PAGES_WRITEBACK_MIN)
		io_writeback(p, (uint32_t)o->w.bucket, pages_byte(p, &o->w, off), len);
	/* Bytes below the running checksum may have changed even if the write failed. */
	if (ret && off < o->h.done)
		o->hash_ok = 0;
	if (ret && lazy_start) {
		/* Undo the move this write began: the writer is left as it was, holding nothing new. */
		pages_free_run(p, o->w.bucket, o->w.page, o->w.npages);
		o->w = o->src;
		o->rewrite = 0;
		pages_src_done(o);
	}
	if (ret)
		return ret;
	if (o->src.bucket >= 0) {
		uint64_t pg, last = (end - 1) / p->page_size, np = pages_for(p, o->src.size);

		for (pg = off / p->page_size; pg <= last && pg < np; pg++)
			pages_mark_filled(o, pg);
		if (!o->unfilled)
			pages_src_done(o);
	}
	if (end > o->w.size)
		o->w.size = end;
	/*
	 * Sequential writes from 0 keep a running checksum; anything else
	 * re-reads.  A copy's bytes are not in memory: the sum stops short of
	 * them, and the commit re-reads.
	 */
	if (o->hash_ok && off == o->h.done && d->buf) {
		if (hasher_feed(&o->h, p->page_size, d->buf, len))
			o->hash_ok = 0;
	} else if (off < o->h.done) {
		o->hash_ok = 0;
	}
	o->dirty = 1;
	o->given = 0; /* the bytes are no longer the adopted ones */
	return (ssize_t)len;
}

ssize_t pages_obj_write(void *arg, struct kvb_obj *o, const void *buf, size_t len,
			uint64_t off)
{
	struct pages_bytes d = { .buf = buf };

	return pages_obj_put(arg, o, &d, len, off);
}

/* The source is another object's run: never the working or committed run of o. */
ssize_t pages_obj_copy(void *arg, struct kvb_obj *o, const struct kvb_map *from, uint64_t from_off,
		       size_t len, uint64_t off)
{
	struct pages_bytes d = { .from = from, .from_off = from_off };

	if (from->bucket < 0 || from_off + len > from->size)
		return -EINVAL;
	return pages_obj_put(arg, o, &d, len, off);
}

int pages_obj_truncate(void *arg, struct kvb_obj *o, uint64_t size)
{
	struct pages *p = arg;
	uint64_t n = pages_for(p, size);
	int ret;

	if (size > p->bucket_size)
		return -EFBIG;
	if (size == o->w.size)
		return 0;
	o->diff_ok = 0;
	/*
	 * A shrink needs the working run to hold its bytes (the tail it cuts
	 * may be refilled later by zeros only).  A grow zero-fills past
	 * w.size, where no page waits for the source.
	 */
	if (size < o->w.size) {
		ret = pages_fill_all(p, o);
		if (ret)
			return ret;
	}
	if (size > o->w.size) {
		ret = pages_cow(p, o, o->w.size, size, 0);
		if (!ret)
			ret = pages_need(p, o, size);
		if (!ret)
			ret = pages_zero_range(p, &o->w, o->w.size, size);
		if (ret)
			return ret;
	} else {
		if (size < o->h.done)
			o->hash_ok = 0;
		/* Give back what the smaller size no longer needs, but never committed pages. */
		if (o->w.bucket >= 0) {
			uint64_t keep = n;

			if (pages_shared(o) && keep < o->c.npages)
				keep = o->c.npages;
			if (o->w.npages > keep) {
				pages_free_run(p, o->w.bucket, o->w.page + keep, o->w.npages - keep);
				o->w.npages = keep;
			}
			if (o->w.npages == 0)
				o->w = KVB_MAP_EMPTY;
		}
	}
	o->w.size = size;
	o->dirty = 1;
	o->given = 0;
	return 0;
}

int pages_obj_reserve(void *arg, struct kvb_obj *o, uint64_t size)
{
	struct pages *p = arg;

	int ret;

	if (size > p->bucket_size)
		return -EFBIG;
	if (size <= o->w.size)
		return 0;
	/* A fresh state's run may get its blocks at pages_reserve_end, with a batch's others. */
	pages_defer_arm(p, o->w.bucket < 0 && o->c.bucket < 0 && o->src.bucket < 0);
	/* The run grows (in place, or moves) as for a write; the size stays. */
	ret = pages_need(p, o, size);
	pages_defer_arm(p, 0);
	return ret;
}

void pages_obj_view(void *arg, struct kvb_obj *o, struct kvb_map *view)
{
	(void)arg;
	*view = o->w;
}

/* Before a reader uses bytes [off, off + len) of the view: their pages filled. */
int pages_obj_settle(void *arg, struct kvb_obj *o, uint64_t off, uint64_t len)
{
	struct pages *p = arg;
	uint64_t pg, last;
	int ret = 0;

	if (len == 0)
		return 0;
	pthread_mutex_lock(&o->fill_lock);
	if (o->src.bucket >= 0) {
		last = (off + len - 1) / p->page_size;
		for (pg = off / p->page_size; !ret && pg <= last; pg++)
			ret = pages_fill_page(p, o, pg);
		if (!ret && !o->unfilled)
			pages_src_done(o);
	}
	pthread_mutex_unlock(&o->fill_lock);
	return ret;
}

int pages_obj_dirty(void *arg, struct kvb_obj *o)
{
	(void)arg;
	return o->dirty;
}

/*
 * A writer that did not commit yet has no sums of c's pages: the store
 * gives them from c's record, so a commit after a few writes in place
 * reads those pages only.
 */
uint64_t pages_obj_sums_wanted(void *arg, struct kvb_obj *o)
{
	(void)arg;
	if (o->pcs_c || !o->diff_ok || !o->diff || o->c.bucket < 0 || o->given ||
	    (o->hash_ok && o->h.done == o->w.size))
		return 0;
	return o->c.npages;
}

void pages_obj_sums_known(void *arg, struct kvb_obj *o, const struct kvb_map *of,
			  const uint64_t *pcs, uint64_t n)
{
	uint64_t *v;

	(void)arg;
	/* Only c's own sums stand for the pages the writer did not change. */
	if (of->bucket != o->c.bucket || of->page != o->c.page || of->size != o->c.size ||
	    n != o->c.npages || n < o->diff_n || o->pcs_c ||
	    !(v = realloc(o->pcs, (n + 1) * sizeof(*v))))
		return;
	memcpy(v, pcs, n * sizeof(*v));
	o->pcs = v;
	o->pcs_c = 1;
}

int pages_obj_commit_prepare(void *arg, struct kvb_obj *o, int sync, struct kvb_map *map,
			     uint64_t *csum, const uint64_t **pcsums)
{
	struct pages *p = arg;
	uint64_t *pcs;
	int ret, reuse;

	ret = pages_fill_all(p, o);
	if (ret)
		return ret;
	if (o->given && o->w.size != o->given_size)
		o->given = 0;
	*map = o->w;
	if (map->size == 0) {
		*map = KVB_MAP_EMPTY;
	} else {
		map->npages = pages_for(p, map->size);
		if (sync) {
			ret = io_sync(p, (uint32_t)map->bucket);
			if (ret)
				return ret;
		}
	}
	/* c's page sums, kept from its commit, stand for the pages written since. */
	reuse = o->pcs_c && o->diff_ok && o->diff;
	o->pcs_c = 0;
	pcs = realloc(o->pcs, (map->npages + 1) * sizeof(*pcs));
	if (!pcs)
		return -ENOMEM;
	o->pcs = pcs;
	if (o->given && map->size) {
		/* The writer's sums, already in pcs (pages_obj_adopt). */
		*csum = o->given_csum;
	} else if (o->hash_ok && o->h.done == map->size) {
		hasher_result(&o->h, p->page_size, csum, pcs);
	} else {
		/* With the sums of the unchanged pages: the changed ones only are read. */
		ret = pages_hash_map(p, map, csum, pcs, reuse ? o->diff : NULL,
				     reuse ? o->diff_n : 0, NULL);
		if (ret)
			return ret;
	}
	*pcsums = pcs;
	o->pending = *map;
	return 0;
}

/*
 * The pages [keep, owned) of a shared run after a commit: those below the
 * old committed length were committed (free later), the rest never were.
 */
static void pages_free_tail(struct pages *p, const struct kvb_obj *o, uint64_t keep,
			    uint64_t owned)
{
	uint64_t committed_end = o->c.npages < owned ? o->c.npages : owned;

	if (committed_end > keep)
		pages_free_later(p, o->c.bucket, o->c.page + keep, committed_end - keep);
	if (owned > committed_end && owned > keep) {
		uint64_t from = keep > committed_end ? keep : committed_end;

		pages_free_run(p, o->c.bucket, o->c.page + from, owned - from);
	}
}

void pages_obj_commit_done(void *arg, struct kvb_obj *o, int ok)
{
	struct pages *p = arg;
	struct kvb_map *n = &o->pending;

	if (!ok)
		return;
	/* A spare holds a version before c: after this commit, two before. */
	pages_spare_drop(p, o);
	pages_park_forget(p, &o->c);
	/*
	 * Free every page the old committed run or the working run held that
	 * the new mapping (always a prefix of the working run) does not.
	 */
	if (pages_shared(o)) {
		uint64_t owned = o->c.npages > o->w.npages ? o->c.npages : o->w.npages;

		if (owned > n->npages)
			pages_free_tail(p, o, n->npages, owned);
	} else {
		if (o->diff_ok && o->c.bucket >= 0) {
			/*
			 * The old run becomes the spare, not free: it is written again
			 * only after a barrier has made this commit durable, as a
			 * freed run would be.
			 */
			struct pages_parked sp = { o->c, o->c, o->diff, o->diff_n, 0 };

			o->diff = NULL;
			pthread_mutex_lock(&p->flock);
			sp.epoch = p->barriers_begun;
			pthread_mutex_unlock(&p->flock);
			pages_spare_attach(p, o, &sp);
		} else {
			pages_free_later(p, o->c.bucket, o->c.page, o->c.npages);
		}
		if (o->w.bucket >= 0 && o->w.npages > n->npages)
			pages_free_run(p, o->w.bucket, o->w.page + n->npages,
				       o->w.npages - n->npages);
	}
	o->c = *n;
	o->w = *n;
	o->dirty = 0;
	o->rewrite = 0;
	free(o->diff);
	o->diff = NULL;
	o->diff_n = 0;
	o->diff_ok = 1;
	o->pcs_c = 1;
}

void pages_obj_close(void *arg, struct kvb_obj *o)
{
	struct pages *p = arg;
	struct pages_parked sp;

	if (!o)
		return;
	pages_drop_working(p, o);
	pages_spare_detach(p, o, &sp);
	if (sp.spare.bucket >= 0 && o->c.bucket >= 0)
		pages_park(p, &sp);
	else
		pages_parked_free(p, &sp);
	hasher_release(&o->h);
	free(o->filled);
	free(o->diff);
	pthread_mutex_destroy(&o->fill_lock);
	free(o->pcs);
	free(o);
}

int pages_obj_adopt(void *arg, struct kvb_obj *o, uint64_t size, const uint64_t *pcs,
		    uint64_t csum)
{
	struct pages *p = arg;

	o->given = 0;
	/* Only a fresh run of the object's own: committed pages are never taken over. */
	if (o->c.bucket >= 0 || o->src.bucket >= 0)
		return -EINVAL;
	if (size == 0) {
		o->w.size = 0;
		o->dirty = 1;
		return 0;
	}
	if (o->w.bucket < 0 || pages_for(p, size) > o->w.npages)
		return -EINVAL;
	if (pcs) {
		uint64_t n = pages_for(p, size), *v = realloc(o->pcs, (n + 1) * sizeof(*v));

		if (!v)
			return -ENOMEM;
		memcpy(v, pcs, n * sizeof(*v));
		o->pcs = v;
		o->given = 1;
		o->given_size = size;
		o->given_csum = csum;
	}
	o->w.size = size;
	o->hash_ok = 0;
	o->diff_ok = 0;
	o->dirty = 1;
	/* The client's writes returned before this: the next barrier syncs them (rule 7). */
	__atomic_store_n(&p->b[o->w.bucket].dirty, 1, __ATOMIC_RELEASE);
	return 0;
}
