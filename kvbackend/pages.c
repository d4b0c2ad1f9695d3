/*
 * pages.c: the pages backend.  Objects live as contiguous page runs inside
 * bucket files, handed out by one bitmap allocator per bucket.
 *
 * Working state rules (DESIGN.md, "Writes"):
 *  - A writer's run is either *shared* (it starts at the committed run and
 *    may extend past it in place) or *private* (a run of its own).
 *  - Bytes in [0, committed size) of a shared run are never modified: the
 *    first write that would touch them moves the object to a private run
 *    (copy-on-write).  Appends go in place.
 *  - A write moves it lazily: the private run starts empty and `src` (the
 *    old run) keeps the bytes of every page not yet *filled*; a page is
 *    filled when a write covers it, or copied from src before a write
 *    covers part of it, and every page is filled before anything else
 *    reads the working run (commit, truncate, a reader: obj_settle).  So an
 *    overwrite of a large file copies only what it does not overwrite.
 *  - Pages reachable only from the working state are freed when it is
 *    dropped; committed pages are freed only in commit_done(ok=1) or by
 *    remove, after the metadata no longer points at them.
 */
#include "kvb.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "alloc.h"
#include "meta.h"

struct pages;

/* Where bucket bytes live: files for real mounts, memory for unit tests. */
struct pages_io {
	ssize_t (*pread)(struct pages *p, uint32_t b, void *buf, size_t len, uint64_t off);
	ssize_t (*pwrite)(struct pages *p, uint32_t b, const void *buf, size_t len, uint64_t off);
	int (*zero)(struct pages *p, uint32_t b, uint64_t off, uint64_t len);
	int (*sync)(struct pages *p, uint32_t b);
	/*
	 * Optional.  reserve: give bytes [off, off + len) real blocks, so that
	 * writing them later cannot fail for want of space (-ENOSPC now
	 * instead); punch: give their blocks back (they then read as zeros).
	 */
	int (*reserve)(struct pages *p, uint32_t b, uint64_t off, uint64_t len);
	int (*punch)(struct pages *p, uint32_t b, uint64_t off, uint64_t len);
	void (*willneed)(struct pages *p, uint32_t b, uint64_t off, uint64_t len); /* optional */
};

struct pages_bucket {
	pthread_mutex_t lock;
	struct alloc a;
	int fd;
	int dirty;          /* written since the last barrier (atomic) */
	unsigned char *mem;
	unsigned char *durable; /* memory buckets: the bytes as of the last sync */
};

/* A committed run whose record is gone: reusable after the next barrier. */
struct pages_freed {
	int32_t bucket;
	uint64_t page, npages;
};

struct pages {
	const struct pages_io *io;
	char *root;
	uint64_t page_size;
	uint64_t bucket_size;
	uint64_t npages;
	uint32_t nbuckets;
	uint64_t keep_free;     /* bytes of the filesystem allocations leave free */
	struct pages_bucket *b;
	struct kvb_mem_faults *faults;
	struct kvb_stats st;    /* updated with atomics */
	pthread_mutex_t flock;  /* the freed list */
	struct pages_freed *freed;
	uint64_t nfreed, freed_cap;
};

/* Whole-object and per-page XXH3-64 of a byte stream fed in order. */
struct pages_hasher {
	XXH3_state_t *whole, *page;
	uint64_t done;     /* bytes fed */
	uint64_t *pcs;     /* sums of the completed pages */
	uint64_t cap;
};

struct kvb_obj {
	struct kvb_map c;  /* committed mapping */
	struct kvb_map w;  /* working run and size */
	struct kvb_map pending; /* mapping handed out by commit_prepare */
	int dirty;
	/* Sequential writes from 0 are hashed as they arrive; else re-read at commit. */
	struct pages_hasher h;
	int hash_ok;
	uint64_t *pcs;     /* per-page sums handed out by commit_prepare */
	/* Lazy copy-on-write (see the top): src.bucket -1 when none. */
	struct kvb_map src;
	uint64_t *filled;  /* bit per page below src.size: the working run holds it */
	uint64_t unfilled;
	pthread_mutex_t fill_lock; /* readers settle the view under a shared data lock */
	size_t klen;
	char key[];
};

#define PAGES_COPY_CHUNK (1u << 20)

static void pages_count(struct pages *p, enum kvb_call c, int failed)
{
	__atomic_add_fetch(&p->st.calls[c], 1, __ATOMIC_RELAXED);
	if (failed)
		__atomic_add_fetch(&p->st.errors[c], 1, __ATOMIC_RELAXED);
}

static ssize_t io_pread(struct pages *p, uint32_t b, void *buf, size_t len, uint64_t off)
{
	ssize_t n = p->io->pread(p, b, buf, len, off);

	pages_count(p, KVB_CALL_READ, n < 0);
	return n;
}

static ssize_t io_pwrite(struct pages *p, uint32_t b, const void *buf, size_t len, uint64_t off)
{
	ssize_t n = p->io->pwrite(p, b, buf, len, off);

	pages_count(p, KVB_CALL_WRITE, n < 0);
	return n;
}

static int io_zero(struct pages *p, uint32_t b, uint64_t off, uint64_t len)
{
	int ret = p->io->zero(p, b, off, len);

	pages_count(p, KVB_CALL_ZERO, ret < 0);
	/* Zeros are data too: the next barrier must sync them (see pages_write_all). */
	__atomic_store_n(&p->b[b].dirty, 1, __ATOMIC_RELEASE);
	return ret;
}

static int io_sync(struct pages *p, uint32_t b)
{
	int ret = p->io->sync(p, b);

	pages_count(p, KVB_CALL_SYNC, ret < 0);
	return ret;
}

/* -ENOSPC when the backing filesystem cannot hold the run; 0 when it can or cannot tell. */
static int io_reserve(struct pages *p, uint32_t b, uint64_t page, uint64_t n)
{
	int ret;

	if (!p->io->reserve || n == 0)
		return 0;
	ret = p->io->reserve(p, b, page * p->page_size, n * p->page_size);
	pages_count(p, KVB_CALL_ZERO, ret < 0);
	return ret;
}

static void io_punch(struct pages *p, uint32_t b, uint64_t page, uint64_t n)
{
	/* Best effort: a run not punched only costs disk space until fsck --repair. */
	if (p->io->punch && n)
		pages_count(p, KVB_CALL_ZERO,
			    p->io->punch(p, b, page * p->page_size, n * p->page_size) < 0);
}

static uint64_t pages_for(const struct pages *p, uint64_t size)
{
	return (size + p->page_size - 1) / p->page_size;
}

static uint64_t pages_byte(const struct pages *p, const struct kvb_map *m, uint64_t off)
{
	return m->page * p->page_size + off;
}

uint32_t kvb_home_bucket(const char *key, size_t len, uint32_t bucket_count)
{
	return (uint32_t)(XXH64(key, len, 0) % bucket_count);
}

void kvb_bucket_name(uint32_t bucket, char *buf, size_t len)
{
	snprintf(buf, len, "bucket_%02x.data", bucket);
}

size_t kvb_desc_escape(char *out, size_t outlen, const char *v)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (; *v; v++) {
		unsigned char c = (unsigned char)*v;
		int esc = c == '%' || c < 0x20 || c == 0x7f;

		if (n + (esc ? 3 : 1) < outlen) {
			if (esc) {
				out[n] = '%';
				out[n + 1] = hex[c >> 4];
				out[n + 2] = hex[c & 15];
			} else {
				out[n] = (char)c;
			}
		}
		n += esc ? 3 : 1;
	}
	if (outlen)
		out[n < outlen ? n : outlen - 1] = '\0';
	return n;
}

int kvb_desc_unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (*s != '%') {
			*w++ = *s;
			continue;
		}
		if (!isxdigit((unsigned char)s[1]) || !isxdigit((unsigned char)s[2]))
			return -EINVAL;
		*w++ = (char)((isdigit((unsigned char)s[1]) ? s[1] - '0' : (s[1] | 0x20) - 'a' + 10) << 4 |
			      (isdigit((unsigned char)s[2]) ? s[2] - '0' : (s[2] | 0x20) - 'a' + 10));
		s += 2;
	}
	*w = '\0';
	return 0;
}

/* ---- allocation, under the bucket's lock ---- */

static int pages_free_run(struct pages *p, int32_t b, uint64_t page, uint64_t n)
{
	int ret;

	if (b < 0 || n == 0)
		return 0;
	/* Its blocks back to the filesystem first, while no one else can have the run. */
	io_punch(p, (uint32_t)b, page, n);
	pthread_mutex_lock(&p->b[b].lock);
	ret = alloc_free(&p->b[b].a, page, n);
	pthread_mutex_unlock(&p->b[b].lock);
	if (!ret)
		__atomic_add_fetch(&p->st.frees, 1, __ATOMIC_RELAXED);
	if (ret)
		fprintf(stderr, "offloadfs: BUG: free of bucket %d pages %llu+%llu: %s\n", b,
			(unsigned long long)page, (unsigned long long)n, strerror(-ret));
	return ret;
}

/*
 * A run a committed record pointed at: its bits stay set until the next
 * barrier has made the record change durable, so a power cut can never
 * bring back a mapping whose pages were handed to someone else.
 */
static int pages_free_later(struct pages *p, int32_t b, uint64_t page, uint64_t n)
{
	int ret = 0;

	if (b < 0 || n == 0)
		return 0;
	pthread_mutex_lock(&p->flock);
	if (p->nfreed == p->freed_cap) {
		uint64_t cap = p->freed_cap ? p->freed_cap * 2 : 64;
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

/* Home bucket first, then the next ones in order; -ENOSPC only if all are full. */
static int pages_alloc_run(struct pages *p, const char *key, size_t klen, uint64_t n,
			   struct kvb_map *out)
{
	uint32_t home, i;
	uint64_t page;
	int ret = -ENOSPC;

	if (n > p->npages)
		return -EFBIG;
	home = kvb_home_bucket(key, klen, p->nbuckets);
	for (i = 0; i < p->nbuckets; i++) {
		uint32_t b = (home + i) % p->nbuckets;

		pthread_mutex_lock(&p->b[b].lock);
		ret = alloc_alloc(&p->b[b].a, n, &page);
		pthread_mutex_unlock(&p->b[b].lock);
		/*
		 * The run gets its blocks now: a write the kernel acknowledged
		 * and writes back later must not find the disk full.  The
		 * buckets share one filesystem, so no other bucket would do.
		 */
		if (ret == 0 && (ret = io_reserve(p, b, page, n)) != 0) {
			pages_free_run(p, (int32_t)b, page, n);
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
	__atomic_add_fetch(&p->st.alloc_failures, 1, __ATOMIC_RELAXED);
	return ret;
}

static int pages_extend_run(struct pages *p, struct kvb_map *m, uint64_t n)
{
	int ret;

	pthread_mutex_lock(&p->b[m->bucket].lock);
	ret = alloc_extend(&p->b[m->bucket].a, m->page, m->npages, n - m->npages);
	pthread_mutex_unlock(&p->b[m->bucket].lock);
	if (ret == 0 && (ret = io_reserve(p, (uint32_t)m->bucket, m->page + m->npages,
					  n - m->npages)) != 0)
		pages_free_run(p, m->bucket, m->page + m->npages, n - m->npages);
	if (ret == 0) {
		m->npages = n;
		__atomic_add_fetch(&p->st.allocations, 1, __ATOMIC_RELAXED);
	}
	return ret == -EINVAL ? -ENOSPC : ret;
}

/* ---- byte I/O helpers ---- */

/*
 * The bucket is marked dirty after the bytes are written, not before: a
 * barrier that cleared the mark between the two would otherwise miss bytes
 * that landed after its fsync, while a commit made after this returns gets
 * a generation only a later barrier covers.
 */
static int pages_write_all(struct pages *p, uint32_t b, const void *buf, size_t len, uint64_t off)
{
	int ret = 0;

	while (len) {
		ssize_t n = io_pwrite(p, b, buf, len, off);

		if (n <= 0) {
			ret = n < 0 ? (int)n : -EIO;
			break;
		}
		buf = (const char *)buf + n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	/* Even a short write changed bytes. */
	__atomic_store_n(&p->b[b].dirty, 1, __ATOMIC_RELEASE);
	return ret;
}

static int pages_read_all(struct pages *p, uint32_t b, void *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = io_pread(p, b, buf, len, off);

		if (n < 0)
			return (int)n;
		if (n == 0) {
			/* Past the end of a sparse file: reads as zeros. */
			memset(buf, 0, len);
			return 0;
		}
		buf = (char *)buf + n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* Copy bytes [off, off + len) of from to the same offset of to. */
static int pages_copy_at(struct pages *p, const struct kvb_map *from, const struct kvb_map *to,
			 uint64_t off, uint64_t len)
{
	uint64_t end = off + len;
	char *buf;
	int ret = 0;

	if (len == 0)
		return 0;
	buf = malloc(PAGES_COPY_CHUNK);
	if (!buf)
		return -ENOMEM;
	while (off < end && !ret) {
		size_t n = end - off < PAGES_COPY_CHUNK ? (size_t)(end - off) : PAGES_COPY_CHUNK;

		ret = pages_read_all(p, (uint32_t)from->bucket, buf, n, pages_byte(p, from, off));
		if (!ret)
			ret = pages_write_all(p, (uint32_t)to->bucket, buf, n, pages_byte(p, to, off));
		off += n;
	}
	free(buf);
	return ret;
}

static int hasher_init(struct pages_hasher *h)
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

static void hasher_release(struct pages_hasher *h)
{
	XXH3_freeState(h->whole);
	XXH3_freeState(h->page);
	free(h->pcs);
	memset(h, 0, sizeof(*h));
}

static int hasher_feed(struct pages_hasher *h, uint64_t ps, const char *buf, size_t len)
{
	XXH3_64bits_update(h->whole, buf, len);
	while (len) {
		uint64_t in_page = h->done % ps;
		size_t n = ps - in_page < len ? (size_t)(ps - in_page) : len;

		XXH3_64bits_update(h->page, buf, n);
		h->done += n;
		buf += n;
		len -= n;
		if (h->done % ps == 0) {
			uint64_t idx = h->done / ps - 1;

			if (idx >= h->cap) {
				uint64_t cap = h->cap ? h->cap * 2 : 16;
				uint64_t *pcs = realloc(h->pcs, cap * sizeof(*pcs));

				if (!pcs)
					return -ENOMEM;
				h->pcs = pcs;
				h->cap = cap;
			}
			h->pcs[idx] = XXH3_64bits_digest(h->page);
			XXH3_64bits_reset(h->page);
		}
	}
	return 0;
}

/* The sums so far, without ending the stream: more appends may follow. */
static void hasher_result(const struct pages_hasher *h, uint64_t ps, uint64_t *csum,
			  uint64_t *pcs)
{
	uint64_t full = h->done / ps;

	*csum = XXH3_64bits_digest(h->whole);
	if (full)
		memcpy(pcs, h->pcs, full * sizeof(*pcs));
	if (h->done % ps)
		pcs[full] = XXH3_64bits_digest(h->page);
}

/* Hash an object's bytes as stored: whole and, when pcs is set, per page. */
static int pages_hash_map(struct pages *p, const struct kvb_map *m, uint64_t *csum, uint64_t *pcs)
{
	struct pages_hasher h;
	char *buf;
	uint64_t done = 0;
	int ret;

	if (m->size == 0 || m->bucket < 0) {
		*csum = XXH3_64bits(NULL, 0);
		return 0;
	}
	buf = malloc(PAGES_COPY_CHUNK);
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
	if (!ret) {
		uint64_t *tmp = pcs ? pcs : malloc((m->npages + 1) * sizeof(*tmp));

		if (tmp)
			hasher_result(&h, p->page_size, csum, tmp);
		else
			ret = -ENOMEM;
		if (!pcs)
			free(tmp);
	}
	hasher_release(&h);
	free(buf);
	return ret;
}

/* ---- working state ---- */

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
static int pages_fill_all(struct pages *p, struct kvb_obj *o)
{
	uint64_t n, pg = 0;
	int ret = 0;

	if (o->src.bucket < 0)
		return 0;
	n = pages_for(p, o->src.size);
	while (!ret && pg < n && o->unfilled) {
		uint64_t end;

		if (pages_filled(o, pg)) {
			pg++;
			continue;
		}
		for (end = pg; end < n && !pages_filled(o, end); end++)
			;
		ret = pages_fill_range(p, o, pg, end);
		for (; !ret && pg < end; pg++)
			pages_mark_filled(o, pg);
	}
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

	ret = pages_alloc_run(p, o->key, o->klen, n, &fresh);
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
	return 0;
}

/* Make the working run hold at least size bytes. */
static int pages_need(struct pages *p, struct kvb_obj *o, uint64_t size)
{
	uint64_t n = pages_for(p, size);

	if (size > p->bucket_size)
		return -EFBIG;
	if (n == 0 || (o->w.bucket >= 0 && o->w.npages >= n))
		return 0;
	if (o->w.bucket >= 0 && o->w.npages > 0 && pages_extend_run(p, &o->w, n) == 0)
		return 0;
	return pages_move(p, o, n);
}

/*
 * Before modifying bytes below `from`: leave a shared run if they are
 * committed.  With lazy set, and a shared run that is exactly the committed
 * one (nothing appended in place), the new run starts unfilled (see the
 * top); otherwise the bytes are copied now.
 */
static int pages_cow(struct pages *p, struct kvb_obj *o, uint64_t from, uint64_t size, int lazy)
{
	struct kvb_map fresh = { 0 };
	uint64_t n, np;
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
	ret = pages_alloc_run(p, o->key, o->klen, n, &fresh);
	if (ret) {
		free(o->filled);
		o->filled = NULL;
		return ret;
	}
	o->src = o->w;
	o->unfilled = np;
	fresh.size = o->w.size;
	o->w = fresh;
	return 0;
}

static int pages_zero_range(struct pages *p, const struct kvb_map *w, uint64_t from, uint64_t to)
{
	if (to <= from)
		return 0;
	return io_zero(p, (uint32_t)w->bucket, pages_byte(p, w, from), to - from);
}

static int pages_obj_open(void *arg, const struct kvb_map *c, const char *key, size_t klen,
			  struct kvb_obj **out)
{
	const char *slash = memchr(key, '/', klen);
	struct kvb_obj *o;

	(void)arg;
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
	pthread_mutex_init(&o->fill_lock, NULL);
	memcpy(o->key, key, klen);
	o->klen = klen;
	*out = o;
	return 0;
}

static ssize_t pages_obj_write(void *arg, struct kvb_obj *o, const void *buf, size_t len,
			       uint64_t off)
{
	struct pages *p = arg;
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
		ret = pages_write_all(p, (uint32_t)o->w.bucket, buf, len, pages_byte(p, &o->w, off));
	/* Bytes below the running checksum may have changed even if the write failed. */
	if (ret && off < o->h.done)
		o->hash_ok = 0;
	if (ret && lazy_start) {
		/* Undo the move this write began: the writer is left as it was, holding nothing new. */
		pages_free_run(p, o->w.bucket, o->w.page, o->w.npages);
		o->w = o->src;
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
	/* Sequential writes from 0 keep a running checksum; anything else re-reads. */
	if (o->hash_ok && off == o->h.done) {
		if (hasher_feed(&o->h, p->page_size, buf, len))
			o->hash_ok = 0;
	} else if (off < o->h.done) {
		o->hash_ok = 0;
	}
	o->dirty = 1;
	return (ssize_t)len;
}

static int pages_obj_truncate(void *arg, struct kvb_obj *o, uint64_t size)
{
	struct pages *p = arg;
	uint64_t n = pages_for(p, size);
	int ret;

	if (size > p->bucket_size)
		return -EFBIG;
	if (size == o->w.size)
		return 0;
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
	return 0;
}

static int pages_obj_reserve(void *arg, struct kvb_obj *o, uint64_t size)
{
	struct pages *p = arg;

	if (size > p->bucket_size)
		return -EFBIG;
	/* The run grows (in place, or moves) as for a write; the size stays. */
	return size > o->w.size ? pages_need(p, o, size) : 0;
}

static void pages_obj_view(void *arg, struct kvb_obj *o, struct kvb_map *view)
{
	(void)arg;
	*view = o->w;
}

/* Before a reader uses bytes [off, off + len) of the view: their pages filled. */
static int pages_obj_settle(void *arg, struct kvb_obj *o, uint64_t off, uint64_t len)
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

static int pages_obj_dirty(void *arg, struct kvb_obj *o)
{
	(void)arg;
	return o->dirty;
}

static int pages_obj_commit_prepare(void *arg, struct kvb_obj *o, int sync, struct kvb_map *map,
				    uint64_t *csum, const uint64_t **pcsums)
{
	struct pages *p = arg;
	uint64_t *pcs;
	int ret;

	ret = pages_fill_all(p, o);
	if (ret)
		return ret;
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
	pcs = realloc(o->pcs, (map->npages + 1) * sizeof(*pcs));
	if (!pcs)
		return -ENOMEM;
	o->pcs = pcs;
	if (o->hash_ok && o->h.done == map->size) {
		hasher_result(&o->h, p->page_size, csum, pcs);
	} else {
		ret = pages_hash_map(p, map, csum, pcs);
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

static void pages_obj_commit_done(void *arg, struct kvb_obj *o, int ok)
{
	struct pages *p = arg;
	struct kvb_map *n = &o->pending;

	if (!ok)
		return;
	/*
	 * Free every page the old committed run or the working run held that
	 * the new mapping (always a prefix of the working run) does not.
	 */
	if (pages_shared(o)) {
		uint64_t owned = o->c.npages > o->w.npages ? o->c.npages : o->w.npages;

		if (owned > n->npages)
			pages_free_tail(p, o, n->npages, owned);
	} else {
		pages_free_later(p, o->c.bucket, o->c.page, o->c.npages);
		if (o->w.bucket >= 0 && o->w.npages > n->npages)
			pages_free_run(p, o->w.bucket, o->w.page + n->npages,
				       o->w.npages - n->npages);
	}
	o->c = *n;
	o->w = *n;
	o->dirty = 0;
}

static void pages_obj_close(void *arg, struct kvb_obj *o)
{
	struct pages *p = arg;

	if (!o)
		return;
	pages_drop_working(p, o);
	hasher_release(&o->h);
	free(o->filled);
	pthread_mutex_destroy(&o->fill_lock);
	free(o->pcs);
	free(o);
}

/* ---- committed objects ---- */

static int pages_check_map(const struct pages *p, const struct kvb_map *m)
{
	if (m->bucket < 0)
		return 0;
	if ((uint32_t)m->bucket >= p->nbuckets || m->page + m->npages > p->npages ||
	    m->size > m->npages * p->page_size)
		return -EUCLEAN;
	return 0;
}

/*
 * The part of [off, off+len) inside committed object m: *len clipped.
 * 1 when there is something to read, 0 at or past the end, or -EUCLEAN.
 */
static int pages_clip(const struct pages *p, const struct kvb_map *m, uint64_t off, size_t *len)
{
	int ret;

	if (off >= m->size || m->bucket < 0)
		return 0;
	ret = pages_check_map(p, m);
	if (ret)
		return ret;
	if (*len > m->size - off)
		*len = (size_t)(m->size - off);
	return 1;
}

/*
 * A read of a whole object asks the bucket for exactly that object first.
 * Left to itself, the kernel's readahead turns a 128 KiB read of a bucket
 * file into a 512 KiB one, past the object into its neighbours and holes,
 * which a random get rarely uses; with the hint a cold get reads as much as
 * one file per key would.  Reads of part of an object (the kernel's READs
 * of an object above the prefill size) keep the readahead, which their
 * later READs need (docs/benchmarks.md has the figures).  Advisory: a
 * failure changes nothing but speed.
 */
static void pages_willneed(struct pages *p, const struct kvb_map *m, uint64_t off, size_t len)
{
	if (off || len < m->size || !m->size || m->bucket < 0 || !p->io->willneed)
		return;
	p->io->willneed(p, (uint32_t)m->bucket, pages_byte(p, m, 0), m->size);
}

static ssize_t pages_read(void *arg, const struct kvb_map *m, void *buf, size_t len, uint64_t off)
{
	struct pages *p = arg;
	int ret = pages_clip(p, m, off, &len);

	if (ret <= 0)
		return ret;
	pages_willneed(p, m, off, len);
	ret = pages_read_all(p, (uint32_t)m->bucket, buf, len, pages_byte(p, m, off));
	return ret ? ret : (ssize_t)len;
}

static int pages_read_fd(void *arg, const struct kvb_map *m, uint64_t off, size_t len, int *fd,
			 off_t *pos)
{
	struct pages *p = arg;

	if (m->bucket < 0 || p->b[m->bucket].fd < 0)
		return -EOPNOTSUPP;
	if (pages_check_map(p, m))
		return -EUCLEAN;
	pages_willneed(p, m, off, len);
	*fd = p->b[m->bucket].fd;
	*pos = (off_t)pages_byte(p, m, off);
	pages_count(p, KVB_CALL_SPLICE, 0);
	return 0;
}

static int pages_remove(void *arg, const struct kvb_map *m)
{
	struct pages *p = arg;

	if (m->bucket < 0)
		return 0;
	if (pages_check_map(p, m))
		return -EUCLEAN;
	return pages_free_later(p, m->bucket, m->page, m->npages);
}

static int pages_barrier(void *arg, uint64_t *mark)
{
	struct pages *p = arg;
	uint32_t i;
	int ret = 0;

	/* The freed list first: only frees recorded before the data sync are covered. */
	pthread_mutex_lock(&p->flock);
	*mark = p->nfreed;
	pthread_mutex_unlock(&p->flock);
	for (i = 0; i < p->nbuckets && !ret; i++) {
		if (__atomic_exchange_n(&p->b[i].dirty, 0, __ATOMIC_ACQ_REL)) {
			ret = io_sync(p, i);
			if (ret)
				__atomic_store_n(&p->b[i].dirty, 1, __ATOMIC_RELAXED);
		}
	}
	return ret;
}

static uint64_t pages_release(void *arg, uint64_t mark)
{
	struct pages *p = arg;
	struct pages_freed *runs;
	uint64_t i, pages = 0;

	/*
	 * The runs are taken off the list first and punched (pages_free_run)
	 * outside flock: commits queue their frees meanwhile.
	 */
	pthread_mutex_lock(&p->flock);
	if (mark > p->nfreed)
		mark = p->nfreed;
	runs = mark ? malloc(mark * sizeof(*runs)) : NULL;
	if (!runs) {
		pthread_mutex_unlock(&p->flock);
		return 0; /* nothing to do, or they wait for the next barrier */
	}
	memcpy(runs, p->freed, mark * sizeof(*runs));
	memmove(p->freed, p->freed + mark, (p->nfreed - mark) * sizeof(*p->freed));
	p->nfreed -= mark;
	pthread_mutex_unlock(&p->flock);
	for (i = 0; i < mark; i++) {
		pages_free_run(p, runs[i].bucket, runs[i].page, runs[i].npages);
		pages += runs[i].npages;
	}
	free(runs);
	return pages;
}

static ssize_t pages_read_verified(void *arg, const struct kvb_map *m, const uint64_t *pcsums,
				   void *buf, size_t len, uint64_t off, uint64_t *bad_page)
{
	struct pages *p = arg;
	uint64_t first, last, from, to, pg;
	char *tmp;
	int ret = pages_clip(p, m, off, &len);

	if (ret <= 0 || !len)
		return ret < 0 ? ret : 0;
	/* Whole pages: a page's sum covers its bytes below the object size. */
	first = off / p->page_size;
	last = (off + len - 1) / p->page_size;
	from = first * p->page_size;
	to = (last + 1) * p->page_size < m->size ? (last + 1) * p->page_size : m->size;
	/* Whole pages asked for (a prefill, an aligned READ): checked in place. */
	tmp = off == from && len == to - from ? buf : malloc(to - from);
	if (!tmp)
		return -ENOMEM;
	pages_willneed(p, m, from, to - from);
	ret = pages_read_all(p, (uint32_t)m->bucket, tmp, to - from, pages_byte(p, m, from));
	for (pg = first; !ret && pg <= last; pg++) {
		uint64_t a = pg * p->page_size - from;
		uint64_t b = pg * p->page_size + p->page_size < to ? a + p->page_size : to - from;

		if (XXH3_64bits(tmp + a, b - a) != pcsums[pg]) {
			*bad_page = pg;
			ret = -EBADMSG;
		}
	}
	if (tmp != buf) {
		if (!ret)
			memcpy(buf, tmp + (off - from), len);
		free(tmp);
	}
	return ret ? ret : (ssize_t)len;
}

static int pages_sync(void *arg, const struct kvb_map *m)
{
	struct pages *p = arg;

	if (m->bucket < 0)
		return 0;
	if (pages_check_map(p, m))
		return -EUCLEAN;
	return io_sync(p, (uint32_t)m->bucket);
}

static int pages_statfs(void *arg, struct kvb_statfs *st)
{
	struct pages *p = arg;
	struct statvfs vfs;
	uint32_t i;

	st->block_size = p->page_size;
	st->blocks = p->npages * p->nbuckets;
	st->blocks_free = 0;
	for (i = 0; i < p->nbuckets; i++) {
		pthread_mutex_lock(&p->b[i].lock);
		st->blocks_free += alloc_free_pages(&p->b[i].a);
		pthread_mutex_unlock(&p->b[i].lock);
	}
	/*
	 * Allocated pages hold their blocks (io_reserve) and freed ones are
	 * punched, so a new page costs one page of the backing filesystem:
	 * free is what both allow, and the size what is used plus that.
	 */
	if (p->b[0].fd >= 0 && fstatvfs(p->b[0].fd, &vfs) == 0) {
		uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;

		avail = avail > p->keep_free ? (avail - p->keep_free) / p->page_size : 0;
		if (avail < st->blocks_free) {
			st->blocks -= st->blocks_free - avail;
			st->blocks_free = avail;
		}
	}
	return 0;
}

static int pages_describe(void *arg, const struct kvb_map *m, char *buf, size_t len)
{
	struct pages *p = arg;
	char name[32], path[PATH_MAX * 3];
	int n;

	if (m->bucket < 0) {
		/* An empty object has no pages; it still has a well-formed descriptor. */
		n = snprintf(buf, len, "file_path=\noffset=0\nobject_size=0\n");
	} else {
		kvb_bucket_name((uint32_t)m->bucket, name, sizeof(name));
		/* A ROOT holding a newline must not add a line. */
		if (kvb_desc_escape(path, sizeof(path), p->root ? p->root : "") >= sizeof(path))
			return -ERANGE;
		n = snprintf(buf, len, "file_path=%s/%s\noffset=%llu\nobject_size=%llu\n",
			     path, name,
			     (unsigned long long)pages_byte(p, m, 0), (unsigned long long)m->size);
	}
	return n < 0 || (size_t)n >= len ? -ERANGE : n;
}

static int pages_checksum(void *arg, const struct kvb_map *m, uint64_t *csum)
{
	struct pages *p = arg;
	int ret = pages_check_map(p, m);

	return ret ? ret : pages_hash_map(p, m, csum, NULL);
}

/* ---- mount and unmount ---- */

struct pages_rebuild {
	struct pages *p;
	uint64_t objects;
	char *msg;
	size_t msglen;
};

static int pages_rebuild_one(void *ctx, const struct meta_inode *in)
{
	struct pages_rebuild *r = ctx;
	int ret;

	if (in->bucket < 0 || (uint32_t)in->bucket >= r->p->nbuckets) {
		snprintf(r->msg, r->msglen, "inode %llu maps to bucket %d, store has %u",
			 (unsigned long long)in->ino, in->bucket, r->p->nbuckets);
		return -EUCLEAN;
	}
	ret = alloc_mark(&r->p->b[in->bucket].a, in->page, in->npages);
	/* A quarantined object yields pages it shares to the intact owner. */
	if (ret == -EEXIST && in->state == META_QUARANTINED)
		return 0;
	if (ret) {
		snprintf(r->msg, r->msglen,
			 "inode %llu maps bucket %d pages %llu+%llu, which %s; run offloadctl fsck",
			 (unsigned long long)in->ino, in->bucket, (unsigned long long)in->page,
			 (unsigned long long)in->npages,
			 ret == -EEXIST ? "overlap another object" : "are out of range");
		return -EUCLEAN;
	}
	r->objects++;
	return 0;
}

static int pages_rebuild(struct pages *p, struct meta *m, char *msg, size_t msglen)
{
	struct pages_rebuild r = { .p = p, .msg = msg, .msglen = msglen };
	uint32_t i;
	int ret;

	for (i = 0; i < p->nbuckets; i++) {
		memset(p->b[i].a.words, 0, p->b[i].a.nwords * sizeof(uint64_t));
		p->b[i].a.used = 0;
		p->b[i].a.hint = 0;
	}
	ret = meta_foreach_mapping(m, pages_rebuild_one, &r);
	if (ret)
		return ret;
	snprintf(msg, msglen, "bitmaps rebuilt from %llu mappings", (unsigned long long)r.objects);
	return 0;
}

static int pages_start(void *arg, struct meta *m, int clean, char *msg, size_t msglen)
{
	struct pages *p = arg;
	uint32_t i;
	int ret = clean ? 0 : -ENOENT;

	for (i = 0; i < p->nbuckets && !ret; i++) {
		struct alloc *a = &p->b[i].a;
		uint64_t *tmp = malloc(a->nwords * sizeof(uint64_t));

		if (!tmp)
			return -ENOMEM;
		ret = meta_bitmap_load(m, i, a->npages, tmp, a->nwords);
		if (!ret)
			ret = alloc_load(a, tmp, a->nwords);
		free(tmp);
	}
	if (ret == 0) {
		snprintf(msg, msglen, "bitmaps loaded from the clean-unmount snapshot");
	} else {
		ret = pages_rebuild(p, m, msg, msglen);
		if (ret)
			return ret;
	}
	/* From here on the snapshot is stale: never load it after a crash. */
	ret = meta_bitmap_clear(m);
	if (ret)
		snprintf(msg, msglen, "cannot clear the clean-unmount snapshot: %s", strerror(-ret));
	return ret;
}

static int pages_stop(void *arg, struct meta *m)
{
	struct pages *p = arg;
	uint32_t i;
	int ret = 0;

	for (i = 0; i < p->nbuckets && !ret; i++) {
		ret = io_sync(p, i);
		if (!ret) {
			pthread_mutex_lock(&p->b[i].lock);
			ret = meta_bitmap_save(m, i, p->b[i].a.npages, p->b[i].a.words,
					       p->b[i].a.nwords);
			pthread_mutex_unlock(&p->b[i].lock);
		}
	}
	return ret;
}

static void pages_stats(void *arg, struct kvb_stats *st)
{
	struct pages *p = arg;
	int i;

	st->allocations = __atomic_load_n(&p->st.allocations, __ATOMIC_RELAXED);
	st->alloc_failures = __atomic_load_n(&p->st.alloc_failures, __ATOMIC_RELAXED);
	st->frees = __atomic_load_n(&p->st.frees, __ATOMIC_RELAXED);
	for (i = 0; i < KVB_NCALLS; i++) {
		st->calls[i] = __atomic_load_n(&p->st.calls[i], __ATOMIC_RELAXED);
		st->errors[i] = __atomic_load_n(&p->st.errors[i], __ATOMIC_RELAXED);
	}
}

static int pages_bucket_usage(void *arg, uint32_t b, uint64_t *used, uint64_t *free_pages,
			      uint64_t *largest_free)
{
	struct pages *p = arg;

	if (b >= p->nbuckets)
		return -ENOENT;
	pthread_mutex_lock(&p->b[b].lock);
	*used = alloc_used(&p->b[b].a);
	*free_pages = alloc_free_pages(&p->b[b].a);
	*largest_free = alloc_largest_free(&p->b[b].a);
	pthread_mutex_unlock(&p->b[b].lock);
	return 0;
}

static void pages_free(void *arg)
{
	struct pages *p = arg;
	uint32_t i;

	if (!p)
		return;
	for (i = 0; p->b && i < p->nbuckets; i++) {
		if (p->b[i].fd >= 0)
			close(p->b[i].fd);
		free(p->b[i].mem);
		free(p->b[i].durable);
		alloc_release(&p->b[i].a);
		pthread_mutex_destroy(&p->b[i].lock);
	}
	free(p->b);
	free(p->freed);
	pthread_mutex_destroy(&p->flock);
	free(p->root);
	free(p);
}

static const struct kvb_ops pages_ops = {
	.name = "pages",
	.start = pages_start,
	.stop = pages_stop,
	.obj_open = pages_obj_open,
	.obj_write = pages_obj_write,
	.obj_truncate = pages_obj_truncate,
	.obj_reserve = pages_obj_reserve,
	.obj_view = pages_obj_view,
	.obj_dirty = pages_obj_dirty,
	.obj_settle = pages_obj_settle,
	.obj_commit_prepare = pages_obj_commit_prepare,
	.obj_commit_done = pages_obj_commit_done,
	.obj_close = pages_obj_close,
	.read = pages_read,
	.read_fd = pages_read_fd,
	.sync = pages_sync,
	.remove = pages_remove,
	.barrier = pages_barrier,
	.release = pages_release,
	.read_verified = pages_read_verified,
	.statfs = pages_statfs,
	.describe = pages_describe,
	.checksum = pages_checksum,
	.stats = pages_stats,
	.bucket_usage = pages_bucket_usage,
	.free = pages_free,
};

/* ---- file-backed buckets ---- */

static ssize_t file_pread(struct pages *p, uint32_t b, void *buf, size_t len, uint64_t off)
{
	ssize_t n = pread(p->b[b].fd, buf, len, (off_t)off);

	return n < 0 ? -errno : n;
}

static ssize_t file_pwrite(struct pages *p, uint32_t b, const void *buf, size_t len, uint64_t off)
{
	ssize_t n = pwrite(p->b[b].fd, buf, len, (off_t)off);

	return n < 0 ? -errno : n;
}

static void file_willneed(struct pages *p, uint32_t b, uint64_t off, uint64_t len)
{
	/* The kernel bounds it to the device's readahead size. */
	(void)posix_fadvise(p->b[b].fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
}

static int file_reserve(struct pages *p, uint32_t b, uint64_t off, uint64_t len)
{
	struct statvfs v;

	/* The metadata's reserve on a shared filesystem is not ours to fill. */
	if (p->keep_free && fstatvfs(p->b[b].fd, &v) == 0 &&
	    (uint64_t)v.f_bavail * v.f_frsize < len + p->keep_free)
		return -ENOSPC;
	if (fallocate(p->b[b].fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
		return 0;
	/* A filesystem without fallocate cannot promise blocks: writes find out. */
	return errno == ENOSPC ? -ENOSPC : errno == EDQUOT ? -EDQUOT : 0;
}

static int file_punch(struct pages *p, uint32_t b, uint64_t off, uint64_t len)
{
	return fallocate(p->b[b].fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
			 (off_t)len)
		       ? -errno
		       : 0;
}

static int file_zero(struct pages *p, uint32_t b, uint64_t off, uint64_t len)
{
	static const char zeros[65536];

	/*
	 * Zeros that keep the range's blocks (it is allocated: io_reserve),
	 * without writing them.  Without ZERO_RANGE (tmpfs): a hole, then
	 * the blocks again; without either, written zeros.
	 */
	if (fallocate(p->b[b].fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)off,
		      (off_t)len) == 0)
		return 0;
	if (errno == ENOSPC)
		return -ENOSPC;
	if (fallocate(p->b[b].fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
		      (off_t)len) == 0) {
		/* The blocks just given back, taken again (no keep_free: they were ours). */
		if (fallocate(p->b[b].fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0 ||
		    (errno != ENOSPC && errno != EDQUOT))
			return 0;
		return -errno;
	}
	while (len) {
		size_t n = len < sizeof(zeros) ? (size_t)len : sizeof(zeros);
		int ret = pages_write_all(p, b, zeros, n, off);

		if (ret)
			return ret;
		off += n;
		len -= n;
	}
	return 0;
}

static int file_sync(struct pages *p, uint32_t b)
{
	return fdatasync(p->b[b].fd) ? -errno : 0;
}

static const struct pages_io file_io = {
	.pread = file_pread,
	.pwrite = file_pwrite,
	.zero = file_zero,
	.sync = file_sync,
	.reserve = file_reserve,
	.punch = file_punch,
	.willneed = file_willneed,
};

static int pages_alloc(struct pages **out, const struct kvb_pages_geom *g, char *err, size_t errlen)
{
	struct pages *p;
	uint32_t i;

	if (g->page_size < 512 || (g->page_size & (g->page_size - 1)) ||
	    g->bucket_size < g->page_size || g->bucket_size % g->page_size ||
	    g->bucket_count < 1 || g->bucket_count > 256) {
		snprintf(err, errlen,
			 "invalid geometry: page_size %llu (a power of two >= 512), bucket_size "
			 "%llu (a multiple of page_size), bucket_count %u (1..256)",
			 (unsigned long long)g->page_size, (unsigned long long)g->bucket_size,
			 g->bucket_count);
		return -EINVAL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->page_size = g->page_size;
	p->bucket_size = g->bucket_size;
	p->npages = g->bucket_size / g->page_size;
	p->nbuckets = g->bucket_count;
	p->keep_free = g->keep_free;
	pthread_mutex_init(&p->flock, NULL);
	p->b = calloc(p->nbuckets, sizeof(*p->b));
	if (!p->b) {
		free(p);
		return -ENOMEM;
	}
	for (i = 0; i < p->nbuckets; i++) {
		p->b[i].fd = -1;
		pthread_mutex_init(&p->b[i].lock, NULL);
		if (alloc_init(&p->b[i].a, p->npages)) {
			p->nbuckets = i + 1;
			pages_free(p);
			snprintf(err, errlen, "out of memory for bitmaps");
			return -ENOMEM;
		}
	}
	*out = p;
	return 0;
}

int kvb_pages_init(struct kvb *kvb, const char *root, const struct kvb_pages_geom *g,
		   int create, char *err, size_t errlen)
{
	struct pages *p;
	char path[PATH_MAX], name[32];
	uint32_t i;
	int ret, dfd = -1;

	ret = pages_alloc(&p, g, err, errlen);
	if (ret)
		return ret;
	p->io = &file_io;
	p->root = realpath(root, NULL);
	if (p->root)
		dfd = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", root, strerror(errno));
		goto out_free;
	}
	for (i = 0; i < p->nbuckets; i++) {
		struct stat st;
		int fd;

		kvb_bucket_name(i, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", p->root, name);
		/*
		 * Never O_TRUNC: a bucket file is only ever extended.  Relative to
		 * ROOT and never through a symbolic link: object bytes go nowhere else.
		 */
		fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0),
			    0600);
		if (fd < 0) {
			ret = -errno;
			snprintf(err, errlen, "%s: %s%s", path,
				 errno == ELOOP ? "a symbolic link, refused" : strerror(errno),
				 errno == ENOENT ? " (bucket file missing from an existing store)" : "");
			goto out_free;
		}
		p->b[i].fd = fd;
		if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
			ret = -EINVAL;
			snprintf(err, errlen, "%s: not a regular file", path);
			goto out_free;
		}
		if ((uint64_t)st.st_size < p->bucket_size) {
			if (!create) {
				/* Extending would turn lost data into zeros that pass for content. */
				ret = -EUCLEAN;
				snprintf(err, errlen,
					 "%s is %lld bytes, expected %llu: truncated bucket file; "
					 "run offloadctl fsck",
					 path, (long long)st.st_size, (unsigned long long)p->bucket_size);
				goto out_free;
			}
			if (ftruncate(fd, (off_t)p->bucket_size)) {
				ret = -errno;
				snprintf(err, errlen, "cannot extend %s to %llu bytes: %s", path,
					 (unsigned long long)p->bucket_size, strerror(errno));
				goto out_free;
			}
		}
	}
	close(dfd);
	kvb->ops = &pages_ops;
	kvb->arg = p;
	return 0;

out_free:
	if (dfd >= 0)
		close(dfd);
	pages_free(p);
	return ret;
}

/* ---- in-memory buckets with fault injection, for unit tests ---- */

static ssize_t mem_pread(struct pages *p, uint32_t b, void *buf, size_t len, uint64_t off)
{
	if (off >= p->bucket_size)
		return 0;
	if (len > p->bucket_size - off)
		len = (size_t)(p->bucket_size - off);
	memcpy(buf, p->b[b].mem + off, len);
	return (ssize_t)len;
}

static ssize_t mem_pwrite(struct pages *p, uint32_t b, const void *buf, size_t len, uint64_t off)
{
	if (p->faults) {
		p->faults->writes++;
		if (p->faults->fail_write_at && p->faults->writes == p->faults->fail_write_at)
			return -EIO;
	}
	if (off + len > p->bucket_size)
		return -ENOSPC;
	memcpy(p->b[b].mem + off, buf, len);
	return (ssize_t)len;
}

static int mem_zero(struct pages *p, uint32_t b, uint64_t off, uint64_t len)
{
	if (off + len > p->bucket_size)
		return -ENOSPC;
	memset(p->b[b].mem + off, 0, len);
	return 0;
}

static int mem_sync(struct pages *p, uint32_t b)
{
	/* What a power cut cannot take away: the bytes as of this sync. */
	memcpy(p->b[b].durable, p->b[b].mem, p->bucket_size);
	return 0;
}

/* Nothing to prefetch in memory: the hint is only recorded, for tests. */
static void mem_willneed(struct pages *p, uint32_t b, uint64_t off, uint64_t len)
{
	if (!p->faults)
		return;
	p->faults->willneeds++;
	p->faults->willneed_bucket = b;
	p->faults->willneed_off = off;
	p->faults->willneed_len = len;
}

static const struct pages_io mem_io = {
	.pread = mem_pread,
	.pwrite = mem_pwrite,
	.zero = mem_zero,
	.sync = mem_sync,
	.willneed = mem_willneed,
};

int kvb_mem_init(struct kvb *kvb, const struct kvb_pages_geom *g, struct kvb_mem_faults *faults)
{
	struct pages *p;
	char err[256];
	uint32_t i;
	int ret;

	ret = pages_alloc(&p, g, err, sizeof(err));
	if (ret)
		return ret;
	p->io = &mem_io;
	p->faults = faults;
	for (i = 0; i < p->nbuckets; i++) {
		/* Filled with a pattern so a read of never-written bytes is visible. */
		p->b[i].mem = malloc(p->bucket_size);
		p->b[i].durable = malloc(p->bucket_size);
		if (!p->b[i].mem || !p->b[i].durable) {
			pages_free(p);
			return -ENOMEM;
		}
		memset(p->b[i].mem, 0xa5, p->bucket_size);
		memset(p->b[i].durable, 0xa5, p->bucket_size);
	}
	kvb->ops = &pages_ops;
	kvb->arg = p;
	return 0;
}

void kvb_mem_power_cut(struct kvb *kvb)
{
	struct pages *p = kvb->arg;
	uint32_t i;

	for (i = 0; i < p->nbuckets; i++)
		memcpy(p->b[i].mem, p->b[i].durable, p->bucket_size);
}
