/*
 * runs.c: page runs of the pages backend.  A run is handed out by its
 * bucket's bitmap allocator (alloc/) and given real blocks at once; a run
 * a committed record pointed at is freed only after the next barrier.
 * Here too: byte I/O over runs, and the checksums of a run's bytes.
 *
 * A freed run is free in the bitmap at once but keeps its disk blocks and
 * its pages in the page cache (it is *warm*, a bit per page in the
 * bucket's warm map): the allocation that takes it next needs no
 * fallocate and its writes find the pages there.  Writing into punched
 * pages costs a new page and a block allocation per page.  pages_cool
 * punches a warm run once it has stayed free PAGES_WARM_DELAY_MS, when warm
 * runs pass their bound, when the backing filesystem runs short, and at
 * unmount.  A warm bit is only ever set on a free page, so statfs counts
 * warm pages as space the filesystem has.
 */
#include "pages_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the warm map, under the bucket's lock ---- */

static int warm_test(const uint64_t *w, uint64_t pg)
{
	return (int)((w[pg / 64] >> (pg % 64)) & 1);
}

/* Set (on) or clear the bits of [page, page + n); how many changed. */
static uint64_t warm_mark(uint64_t *w, uint64_t page, uint64_t n, int on)
{
	uint64_t pg, changed = 0;

	for (pg = page; pg < page + n; pg++) {
		uint64_t bit = 1ull << (pg % 64);

		if (((w[pg / 64] & bit) != 0) != on) {
			w[pg / 64] ^= bit;
			changed++;
		}
	}
	return changed;
}

/* The first run of warm pages in [from, end): 1 and [*s, *e), or 0. */
static int warm_next(const uint64_t *w, uint64_t from, uint64_t end, uint64_t *s, uint64_t *e)
{
	while (from < end && !warm_test(w, from))
		from++;
	if (from == end)
		return 0;
	*s = from;
	while (from < end && warm_test(w, from))
		from++;
	*e = from;
	return 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- allocation, under the bucket's lock ---- */

/* Freed for good: the blocks back first, while no one else can have the run. */
static int pages_free_cold(struct pages *p, int32_t b, uint64_t page, uint64_t n)
{
	int ret;

	io_punch(p, (uint32_t)b, page, n);
	pthread_mutex_lock(&p->b[b].lock);
	ret = alloc_free(&p->b[b].a, page, n);
	pthread_mutex_unlock(&p->b[b].lock);
	return ret;
}

/* Punch what is still warm of [page, page + n) in bucket b. */
static void pages_cool_run(struct pages *p, int32_t b, uint64_t page, uint64_t n)
{
	struct pages_bucket *bk = &p->b[b];
	uint64_t from = page, s, e;

	for (;;) {
		pthread_mutex_lock(&bk->lock);
		if (!warm_next(bk->warm, from, page + n, &s, &e)) {
			pthread_mutex_unlock(&bk->lock);
			return;
		}
		/*
		 * Held (allocated) while the blocks go back, so no allocation
		 * can take the pages between the punch and its free.
		 */
		if (alloc_mark(&bk->a, s, e - s)) {
			pthread_mutex_unlock(&bk->lock);
			fprintf(stderr, "offloadfs: BUG: warm pages %llu+%llu of bucket %d in use\n",
				(unsigned long long)s, (unsigned long long)(e - s), b);
			return;
		}
		warm_mark(bk->warm, s, e - s, 0);
		/* With the bits, under the lock: statfs never counts them twice. */
		__atomic_sub_fetch(&p->warm_pages, e - s, __ATOMIC_RELAXED);
		bk->cooling += e - s; /* statfs still counts them free */
		/* An allocation that finds them held waits for them (pages_alloc_run). */
		pthread_mutex_lock(&p->clock);
		p->ncooling++;
		pthread_mutex_unlock(&p->clock);
		pthread_mutex_unlock(&bk->lock);
		io_punch(p, (uint32_t)b, s, e - s);
		pthread_mutex_lock(&bk->lock);
		bk->cooling -= e - s;
		if (alloc_free(&bk->a, s, e - s))
			fprintf(stderr, "offloadfs: BUG: free of cooled pages %llu+%llu of bucket %d\n",
				(unsigned long long)s, (unsigned long long)(e - s), b);
		pthread_mutex_unlock(&bk->lock);
		pthread_mutex_lock(&p->clock);
		p->ncooling--;
		p->ncooled++;
		pthread_cond_broadcast(&p->cooled);
		pthread_mutex_unlock(&p->clock);
		from = e;
	}
}

/*
 * Punch the warm runs that are due: freed PAGES_WARM_DELAY_MS ago or more,
 * the oldest while warm pages pass their bound, every one with all (or
 * when the backing filesystem has less room than they hold).
 */
void pages_cool(struct pages *p, int all)
{
	struct pages_warm_run *due;
	uint64_t k = 0, i, now = now_ns();
	uint64_t warm = __atomic_load_n(&p->warm_pages, __ATOMIC_RELAXED);
	uint64_t excess = warm > p->warm_max_pages ? warm - p->warm_max_pages : 0;

	if (!all && warm && io_short(p, warm * p->page_size))
		all = 1;
	pthread_mutex_lock(&p->wlock);
	while (k < p->nwruns && (all || excess || p->wruns[k].freed_ns + p->warm_delay_ns <= now)) {
		excess -= excess < p->wruns[k].npages ? excess : p->wruns[k].npages;
		k++;
	}
	due = k ? malloc(k * sizeof(*due)) : NULL;
	if (due) {
		memcpy(due, p->wruns, k * sizeof(*due));
		memmove(p->wruns, p->wruns + k, (p->nwruns - k) * sizeof(*due));
		p->nwruns -= k;
	}
	pthread_mutex_unlock(&p->wlock);
	for (i = 0; due && i < k; i++)
		pages_cool_run(p, due[i].bucket, due[i].page, due[i].npages);
	free(due);
}

/* Remember a warm run for pages_cool; 0 when there is no room to. */
static int warm_push(struct pages *p, int32_t b, uint64_t page, uint64_t n)
{
	int listed = 0;

	pthread_mutex_lock(&p->wlock);
	if (p->nwruns == p->wruns_cap) {
		uint64_t cap = p->wruns_cap ? p->wruns_cap * 2 : PAGES_FREED_INITIAL;
		struct pages_warm_run *w = realloc(p->wruns, cap * sizeof(*w));

		if (w) {
			p->wruns = w;
			p->wruns_cap = cap;
		}
	}
	if (p->nwruns < p->wruns_cap) {
		p->wruns[p->nwruns++] = (struct pages_warm_run){ b, page, n, now_ns() };
		listed = 1;
	}
	pthread_mutex_unlock(&p->wlock);
	return listed;
}

/*
 * At mount: free pages that hold blocks (a crash came between their free
 * and their punch) are warm, as if just freed.  A clean unmount leaves none.
 */
void pages_warm_seed(struct pages *p)
{
	uint32_t b;

	for (b = 0; b < p->nbuckets; b++) {
		struct pages_bucket *bk = &p->b[b];
		uint64_t off = 0, s, e;

		while (bk->warm && io_next_data(p, b, off, &s, &e)) {
			uint64_t pg = s / p->page_size;
			uint64_t end = (e + p->page_size - 1) / p->page_size;

			if (end > p->npages)
				end = p->npages;
			while (pg < end) {
				uint64_t from, n;

				pthread_mutex_lock(&bk->lock);
				while (pg < end && (alloc_test(&bk->a, pg) || warm_test(bk->warm, pg)))
					pg++;
				from = pg;
				while (pg < end && !alloc_test(&bk->a, pg) && !warm_test(bk->warm, pg))
					pg++;
				n = pg - from;
				if (n) {
					warm_mark(bk->warm, from, n, 1);
					__atomic_add_fetch(&p->warm_pages, n, __ATOMIC_RELAXED);
				}
				pthread_mutex_unlock(&bk->lock);
				if (!n)
					break;
				if (!warm_push(p, (int32_t)b, from, n))
					pages_cool_run(p, (int32_t)b, from, n);
			}
			off = e;
		}
	}
}

int pages_free_run(struct pages *p, int32_t b, uint64_t page, uint64_t n)
{
	struct pages_bucket *bk;
	int ret;

	if (b < 0 || n == 0)
		return 0;
	bk = &p->b[b];
	if (!bk->warm) {
		ret = pages_free_cold(p, b, page, n);
		goto out;
	}
	pthread_mutex_lock(&bk->lock);
	ret = alloc_free(&bk->a, page, n);
	/*
	 * Counted with the bits, under the lock: an allocation that takes
	 * the run the moment the lock is let go subtracts them (pages_unwarm)
	 * from a count that already has them, never below zero.
	 */
	if (!ret)
		__atomic_add_fetch(&p->warm_pages, warm_mark(bk->warm, page, n, 1),
				   __ATOMIC_RELAXED);
	pthread_mutex_unlock(&bk->lock);
	if (ret)
		goto out;
	/* No room to remember it: punched now. */
	if (!warm_push(p, b, page, n))
		pages_cool_run(p, b, page, n);
out:
	if (!ret)
		__atomic_add_fetch(&p->st.frees, 1, __ATOMIC_RELAXED);
	if (ret)
		fprintf(stderr, "offloadfs: BUG: free of bucket %d pages %llu+%llu: %s\n", b,
			(unsigned long long)page, (unsigned long long)n, strerror(-ret));
	return ret;
}

/*
 * Runs a thread allocates between pages_reserve_begin and
 * pages_reserve_end (a batch's reserve) get their blocks at the end, those
 * adjacent in a bucket with one fallocate rather than one per run.
 * Meanwhile they are allocated and held by fresh working states that no
 * one writes (the client learns of them from the reply, after the end).
 */
struct pages_defer_run {
	uint32_t b;
	int failed;
	uint64_t page, n;
};

struct pages_defer {
	struct pages *p;
	int armed; /* in the obj_reserve of a fresh state: its run may wait */
	struct pages_defer_run *r;
	size_t n, cap;
};

static __thread struct pages_defer *pages_deferred;

/* Only a fresh state's run waits: no one else allocating on this thread meanwhile. */
void pages_defer_arm(struct pages *p, int on)
{
	if (pages_deferred && pages_deferred->p == p)
		pages_deferred->armed = on;
}

/* 1 when the run is left for pages_reserve_end. */
static int pages_defer_add(struct pages *p, uint32_t b, uint64_t page, uint64_t n)
{
	struct pages_defer *d = pages_deferred;

	if (!d || d->p != p || !d->armed)
		return 0;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		struct pages_defer_run *r = realloc(d->r, cap * sizeof(*r));

		if (!r)
			return 0; /* its blocks now, as without a batch */
		d->r = r;
		d->cap = cap;
	}
	d->r[d->n++] = (struct pages_defer_run){ .b = b, .page = page, .n = n };
	return 1;
}

int pages_reserve_begin(void *arg)
{
	struct pages_defer *d;

	if (pages_deferred)
		return -EBUSY;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->p = arg;
	pages_deferred = d;
	return 0;
}

static int pages_defer_cmp(const void *a, const void *b)
{
	const struct pages_defer_run *x = a, *y = b;

	if (x->b != y->b)
		return x->b < y->b ? -1 : 1;
	return (x->page > y->page) - (x->page < y->page);
}

/* Blocks for [page, page + n), with the warm runs punched first if the filesystem is short. */
static int pages_defer_hold(struct pages *p, uint32_t b, uint64_t page, uint64_t n)
{
	int ret = io_reserve(p, b, page, n);

	if (ret == -ENOSPC && __atomic_load_n(&p->warm_pages, __ATOMIC_RELAXED)) {
		pages_cool(p, 1);
		ret = io_reserve(p, b, page, n);
	}
	return ret;
}

void pages_reserve_end(void *arg, struct kvb_obj *const *objs, size_t nobj, int *errs)
{
	struct pages *p = arg;
	struct pages_defer *d = pages_deferred;
	size_t i, j, k;

	for (i = 0; i < nobj; i++)
		errs[i] = 0;
	if (!d)
		return;
	pages_deferred = NULL;
	if (d->n > 1)
		qsort(d->r, d->n, sizeof(*d->r), pages_defer_cmp);
	for (i = 0; i < d->n; i = j) {
		uint64_t end = d->r[i].page + d->r[i].n;

		for (j = i + 1; j < d->n && d->r[j].b == d->r[i].b && d->r[j].page == end; j++)
			end += d->r[j].n;
		if (pages_defer_hold(p, d->r[i].b, d->r[i].page, end - d->r[i].page) == 0)
			continue;
		/* Run by run, as without a batch: those that find no room fail. */
		for (k = i; k < j; k++)
			d->r[k].failed = pages_defer_hold(p, d->r[k].b, d->r[k].page, d->r[k].n) != 0;
	}
	for (k = 0; k < d->n; k++) {
		if (!d->r[k].failed)
			continue;
		for (i = 0; i < nobj; i++) {
			struct kvb_obj *o = objs[i];

			if (!o || o->w.bucket != (int32_t)d->r[k].b || o->w.page > d->r[k].page ||
			    o->w.page + o->w.npages < d->r[k].page + d->r[k].n)
				continue;
			/* Back without blocks and never warm; the state as fresh as it was. */
			pages_free_cold(p, o->w.bucket, o->w.page, o->w.npages);
			o->w = KVB_MAP_EMPTY;
			errs[i] = -ENOSPC;
		}
	}
	free(d->r);
	free(d);
}

/*
 * Give [page, page + n) of bucket b, just allocated, its blocks: none to
 * get when every page was warm; else an fallocate, which a short
 * filesystem may refuse until the warm runs are punched.
 */
static int pages_hold_blocks(struct pages *p, uint32_t b, uint64_t page, uint64_t n,
			     uint64_t warm)
{
	int ret;

	if (warm == n)
		return 0;
	if (pages_defer_add(p, b, page, n))
		return 0;
	ret = io_reserve(p, b, page, n);
	if (ret == -ENOSPC && __atomic_load_n(&p->warm_pages, __ATOMIC_RELAXED)) {
		pages_cool(p, 1);
		ret = io_reserve(p, b, page, n);
	}
	return ret;
}

/* Allocated under the bucket's lock: its pages are warm no more. */
static uint64_t pages_unwarm(struct pages *p, struct pages_bucket *bk, uint64_t page, uint64_t n)
{
	uint64_t w;

	if (!bk->warm)
		return 0;
	w = warm_mark(bk->warm, page, n, 0);
	__atomic_sub_fetch(&p->warm_pages, w, __ATOMIC_RELAXED);
	return w;
}

/*
 * A run a committed record pointed at: its bits stay set until the next
 * barrier has made the record change durable, so a power cut can never
 * bring back a mapping whose pages were handed to someone else.
 */
int pages_free_later(struct pages *p, int32_t b, uint64_t page, uint64_t n)
{
	int ret = 0;

	if (b < 0 || n == 0)
		return 0;
	pthread_mutex_lock(&p->flock);
	if (p->nfreed == p->freed_cap) {
		uint64_t cap = p->freed_cap ? p->freed_cap * 2 : PAGES_FREED_INITIAL;
		struct pages_freed *f = realloc(p->freed, cap * sizeof(*f));

		if (f) {
			p->freed = f;
			p->freed_cap = cap;
		}
	}
	if (p->nfreed < p->freed_cap)
		p->freed[p->nfreed++] = (struct pages_freed){ b, page, n };
	else
		ret = -ENOMEM; /* the pages stay allocated: leaked until the next rebuild */
	pthread_mutex_unlock(&p->flock);
	return ret;
}

/* Punches done so far (pages_cooling_wait's seen). */
static uint64_t pages_cooled(struct pages *p)
{
	uint64_t n;

	pthread_mutex_lock(&p->clock);
	n = p->ncooled;
	pthread_mutex_unlock(&p->clock);
	return n;
}

/*
 * Wait for the punches under way: 1 when some punch ended since seen (its
 * pages are free again, worth another try), else 0.
 */
static int pages_cooling_wait(struct pages *p, uint64_t seen)
{
	int ended;

	pthread_mutex_lock(&p->clock);
	while (p->ncooling)
		pthread_cond_wait(&p->cooled, &p->clock);
	ended = p->ncooled != seen;
	pthread_mutex_unlock(&p->clock);
	return ended;
}

/* Home bucket first, then the next ones in order; -ENOSPC only if all are full. */
static int pages_alloc_try(struct pages *p, const char *key, size_t klen, uint64_t n,
			   struct kvb_map *out)
{
	uint32_t home, i;
	uint64_t page;
	int ret = -ENOSPC;

	home = kvb_home_bucket(key, klen, p->nbuckets);
	for (i = 0; i < p->nbuckets; i++) {
		uint32_t b = (home + i) % p->nbuckets;
		uint64_t warm = 0;

		pthread_mutex_lock(&p->b[b].lock);
		ret = alloc_alloc(&p->b[b].a, n, &page);
		if (ret == 0)
			warm = pages_unwarm(p, &p->b[b], page, n);
		pthread_mutex_unlock(&p->b[b].lock);
		/*
		 * The run gets its blocks now: a write the kernel acknowledged
		 * and writes back later must not find the disk full.  The
		 * buckets share one filesystem, so no other bucket would do.
		 */
		if (ret == 0 && (ret = pages_hold_blocks(p, b, page, n, warm)) != 0) {
			pages_free_cold(p, (int32_t)b, page, n);
			break;
		}
		if (ret == 0) {
			__atomic_add_fetch(&p->st.allocations, 1, __ATOMIC_RELAXED);
			out->bucket = (int32_t)b;
			out->page = page;
			out->npages = n;
			return 0;
		}
		if (ret != -ENOSPC)
			return ret;
	}
	return ret;
}

int pages_alloc_run(struct pages *p, const char *key, size_t klen, uint64_t n,
		    struct kvb_map *out)
{
	uint64_t seen;
	int ret;

	if (n > p->npages)
		return -EFBIG;
	seen = pages_cooled(p);
	ret = pages_alloc_try(p, key, klen, n, out);
	/*
	 * Warm runs being punched are held allocated meanwhile: free pages
	 * all the same.  Once the punches end, once more.
	 */
	if (ret == -ENOSPC && pages_cooling_wait(p, seen))
		ret = pages_alloc_try(p, key, klen, n, out);
	if (ret)
		__atomic_add_fetch(&p->st.alloc_failures, 1, __ATOMIC_RELAXED);
	return ret;
}

int pages_extend_run(struct pages *p, struct kvb_map *m, uint64_t n)
{
	uint64_t warm = 0;
	int ret;

	pthread_mutex_lock(&p->b[m->bucket].lock);
	ret = alloc_extend(&p->b[m->bucket].a, m->page, m->npages, n - m->npages);
	if (ret == 0)
		warm = pages_unwarm(p, &p->b[m->bucket], m->page + m->npages, n - m->npages);
	pthread_mutex_unlock(&p->b[m->bucket].lock);
	if (ret == 0 && (ret = pages_hold_blocks(p, (uint32_t)m->bucket, m->page + m->npages,
						 n - m->npages, warm)) != 0)
		pages_free_cold(p, m->bucket, m->page + m->npages, n - m->npages);
	if (ret == 0) {
		m->npages = n;
		__atomic_add_fetch(&p->st.allocations, 1, __ATOMIC_RELAXED);
	}
	return ret == -EINVAL ? -ENOSPC : ret;
}

/* ---- byte I/O over runs ---- */

/*
 * Copy len bytes at from_off of from to to_off of to (different runs):
 * inside the storage when it can (io_copy), else through a buffer.
 */
int pages_copy_range(struct pages *p, const struct kvb_map *from, uint64_t from_off,
		     const struct kvb_map *to, uint64_t to_off, uint64_t len)
{
	uint64_t done;
	char *buf;
	int ret;

	if (len == 0)
		return 0;
	ret = io_copy(p, (uint32_t)from->bucket, pages_byte(p, from, from_off),
		      (uint32_t)to->bucket, pages_byte(p, to, to_off), len, &done);
	if (ret <= 0)
		return ret;
	from_off += done;
	to_off += done;
	len -= done;
	buf = malloc(len < PAGES_COPY_CHUNK ? len : PAGES_COPY_CHUNK);
	if (!buf)
		return -ENOMEM;
	ret = 0;
	while (len && !ret) {
		size_t n = len < PAGES_COPY_CHUNK ? (size_t)len : PAGES_COPY_CHUNK;

		ret = pages_read_all(p, (uint32_t)from->bucket, buf, n, pages_byte(p, from, from_off));
		if (!ret)
			ret = pages_write_all(p, (uint32_t)to->bucket, buf, n, pages_byte(p, to, to_off));
		from_off += n;
		to_off += n;
		len -= n;
	}
	free(buf);
	return ret;
}

/* Copy bytes [off, off + len) of from to the same offset of to. */
int pages_copy_at(struct pages *p, const struct kvb_map *from, const struct kvb_map *to,
		  uint64_t off, uint64_t len)
{
	return pages_copy_range(p, from, off, to, off, len);
}

/* ---- checksums ---- */

int hasher_init(struct pages_hasher *h)
{
	memset(h, 0, sizeof(*h));
	h->whole = XXH3_createState();
	h->page = XXH3_createState();
	if (!h->whole || !h->page) {
		XXH3_freeState(h->whole);
		XXH3_freeState(h->page);
		h->whole = h->page = NULL;
		return -ENOMEM;
	}
	XXH3_64bits_reset(h->whole);
	XXH3_64bits_reset(h->page);
	return 0;
}

void hasher_release(struct pages_hasher *h)
{
	XXH3_freeState(h->whole);
	XXH3_freeState(h->page);
	free(h->pcs);
	memset(h, 0, sizeof(*h));
}

int hasher_feed(struct pages_hasher *h, uint64_t ps, const char *buf, size_t len)
{
	XXH3_64bits_update(h->whole, buf, len);
	while (len) {
		uint64_t in_page = h->done % ps;
		size_t n = ps - in_page < len ? (size_t)(ps - in_page) : len;
		/* A whole page at once: one call, cheaper than the streaming state. */
		int whole = in_page == 0 && n == ps;
		uint64_t sum = 0;

		if (whole)
			sum = XXH3_64bits(buf, n);
		else
			XXH3_64bits_update(h->page, buf, n);
		h->done += n;
		buf += n;
		len -= n;
		if (h->done % ps == 0) {
			uint64_t idx = h->done / ps - 1;

			if (idx >= h->cap) {
				uint64_t cap = h->cap ? h->cap * 2 : PAGES_PCS_INITIAL;
				uint64_t *pcs = realloc(h->pcs, cap * sizeof(*pcs));

				if (!pcs)
					return -ENOMEM;
				h->pcs = pcs;
				h->cap = cap;
			}
			if (whole) {
				h->pcs[idx] = sum;
			} else {
				h->pcs[idx] = XXH3_64bits_digest(h->page);
				XXH3_64bits_reset(h->page);
			}
		}
	}
	return 0;
}

/* The sums so far, without ending the stream: more appends may follow. */
void hasher_result(const struct pages_hasher *h, uint64_t ps, uint64_t *csum,
		   uint64_t *pcs)
{
	uint64_t full = h->done / ps;

	*csum = XXH3_64bits_digest(h->whole);
	if (full)
		memcpy(pcs, h->pcs, full * sizeof(*pcs));
	if (h->done % ps)
		pcs[full] = XXH3_64bits_digest(h->page);
}

/*
 * Page sums of the pages of m set in diff or at or past nknown, into pcs
 * (the others are there already): only those pages are read, in runs of
 * consecutive ones.
 */
static int pages_hash_changed(struct pages *p, const struct kvb_map *m, uint64_t *pcs,
			      const uint64_t *diff, uint64_t nknown)
{
	uint64_t ps = p->page_size, npages = pages_for(p, m->size), pg = 0;
	uint64_t chunk = PAGES_COPY_CHUNK / ps;
	char *buf = NULL;
	int ret = 0;

	while (!ret && pg < npages) {
		uint64_t end, off, len, at;

		if (pg < nknown && !((diff[pg / 64] >> (pg % 64)) & 1)) {
			pg++;
			continue;
		}
		for (end = pg + 1; end < npages && end - pg < chunk; end++)
			if (end < nknown && !((diff[end / 64] >> (end % 64)) & 1))
				break;
		if (!buf && !(buf = malloc(PAGES_COPY_CHUNK)))
			return -ENOMEM;
		off = pg * ps;
		len = (end * ps < m->size ? end * ps : m->size) - off;
		ret = pages_read_all(p, (uint32_t)m->bucket, buf, (size_t)len, pages_byte(p, m, off));
		for (at = 0; !ret && at < len; at += ps, pg++)
			pcs[pg] = XXH3_64bits(buf + at, len - at < ps ? (size_t)(len - at) : (size_t)ps);
	}
	free(buf);
	return ret;
}

/*
 * Hash an object's bytes as stored: whole and, when pcs is set, per page;
 * bypage (may be NULL) gets the sum of the page sums (kvb_hash.h).  With
 * diff, the sums of pages below nknown whose bit is clear are in pcs
 * already (pages unchanged since they were hashed): only the changed
 * pages are read, and *csum is the sum of the page sums.
 */
int pages_hash_map(struct pages *p, const struct kvb_map *m, uint64_t *csum, uint64_t *pcs,
		   const uint64_t *diff, uint64_t nknown, uint64_t *bypage)
{
	struct pages_hasher h;
	char *buf;
	uint64_t done = 0, *tmp;
	int ret;

	if (m->size == 0 || m->bucket < 0) {
		*csum = XXH3_64bits(NULL, 0);
		if (bypage)
			*bypage = *csum;
		return 0;
	}
	if (pcs && diff && p->page_size <= PAGES_COPY_CHUNK) {
		ret = pages_hash_changed(p, m, pcs, diff, nknown);
		if (!ret)
			*csum = kvb_pcsums_sum(pcs, pages_for(p, m->size));
		return ret;
	}
	/* No larger than the object: a small one is read into memory that stays in cache. */
	buf = malloc(m->size < PAGES_COPY_CHUNK ? (size_t)m->size : PAGES_COPY_CHUNK);
	if (!buf)
		return -ENOMEM;
	ret = hasher_init(&h);
	while (!ret && done < m->size) {
		size_t n = m->size - done < PAGES_COPY_CHUNK ? (size_t)(m->size - done)
							     : PAGES_COPY_CHUNK;

		ret = pages_read_all(p, (uint32_t)m->bucket, buf, n, pages_byte(p, m, done));
		if (!ret)
			ret = hasher_feed(&h, p->page_size, buf, n);
		done += n;
	}
	tmp = pcs ? pcs : malloc((pages_for(p, m->size) + 1) * sizeof(*tmp));
	if (!ret && !tmp)
		ret = -ENOMEM;
	if (!ret) {
		hasher_result(&h, p->page_size, csum, tmp);
		if (bypage)
			*bypage = kvb_pcsums_sum(tmp, pages_for(p, m->size));
	}
	if (!pcs)
		free(tmp);
	hasher_release(&h);
	free(buf);
	return ret;
}
