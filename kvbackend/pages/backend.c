/*
 * backend.c: the pages backend.  Objects live as contiguous page runs inside
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
 *  - A commit from a private run keeps the old committed run as the
 *    writer's spare (writer.c), with the pages that commit changed; the
 *    next copy-on-write writes into it, copying only those, once a barrier
 *    begun after that commit has been released (as a freed run would be
 *    reused).  Closed writers' spares are parked beside their committed
 *    run for the object's next writer.
 *
 * The files of the backend, and the lock order, are listed in pages_int.h.
 */
#include "pages_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "meta.h"

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
 * Left to itself, the kernel's readahead reads well past the object into
 * its neighbours and holes, which a random get rarely uses.  Reads of part
 * of an object (the kernel's READs of an object above the prefill size)
 * keep the readahead: hinting the whole object at the first READ made
 * those gets slower.  Advisory: a failure changes nothing but speed.
 */
static void pages_willneed(struct pages *p, const struct kvb_map *m, uint64_t off, size_t len)
{
	if (off || len < m->size || !m->size || m->bucket < 0 || !p->io->willneed)
		return;
	io_willneed(p, (uint32_t)m->bucket, pages_byte(p, m, 0), m->size);
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
	pages_park_forget(p, m);
	return pages_free_later(p, m->bucket, m->page, m->npages);
}

/* The freed list as of now: only frees recorded before the data sync are covered. */
static uint64_t pages_barrier_begin(void *arg)
{
	struct pages *p = arg;
	uint64_t mark;

	pthread_mutex_lock(&p->flock);
	mark = p->nfreed;
	p->barriers_begun++;
	pthread_mutex_unlock(&p->flock);
	return mark;
}

static int pages_barrier_sync(void *arg)
{
	struct pages *p = arg;
	uint32_t i;
	int ret = 0;

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
	p->barriers_released = p->barriers_begun;
	if (mark > p->nfreed)
		mark = p->nfreed;
	runs = mark ? malloc(mark * sizeof(*runs)) : NULL;
	if (!runs) {
		pthread_mutex_unlock(&p->flock);
		pages_cool(p, 0);
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
	/* A burst of frees may have passed the warm runs' bound. */
	pages_cool(p, 0);
	return pages;
}

/* Every tick, busy or idle: warm runs that stayed free are punched. */
static void pages_tick(void *arg)
{
	pages_cool(arg, 0);
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

/* Whole pages past the page cache, each checked against pcsums when given. */
static ssize_t pages_read_uncached(void *arg, const struct kvb_map *m, const uint64_t *pcsums,
				   void *buf, size_t len, uint64_t off, uint64_t *bad_page)
{
	struct pages *p = arg;
	uint64_t pg;
	int ret = pages_clip(p, m, off, &len);

	if (ret <= 0 || !len)
		return ret < 0 ? ret : 0;
	/* A part page (the object's last) is the page cache's: its sum covers less. */
	if (len % p->page_size)
		return -EOPNOTSUPP;
	ret = io_read_uncached(p, (uint32_t)m->bucket, buf, len, pages_byte(p, m, off));
	for (pg = 0; !ret && pcsums && pg < len / p->page_size; pg++) {
		if (XXH3_64bits((char *)buf + pg * p->page_size, p->page_size) !=
		    pcsums[off / p->page_size + pg]) {
			*bad_page = off / p->page_size + pg;
			ret = -EBADMSG;
		}
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
	uint64_t cooling = 0, spares;
	uint32_t i;

	st->block_size = p->page_size;
	st->blocks = p->npages * p->nbuckets;
	st->blocks_free = 0;
	for (i = 0; i < p->nbuckets; i++) {
		pthread_mutex_lock(&p->b[i].lock);
		st->blocks_free += alloc_free_pages(&p->b[i].a) + p->b[i].cooling;
		cooling += p->b[i].cooling;
		pthread_mutex_unlock(&p->b[i].lock);
	}
	/* Spare runs, parked or open writers', are given up before any allocation fails: free. */
	pthread_mutex_lock(&p->park_lock);
	spares = p->parked_pages + p->spare_pages;
	pthread_mutex_unlock(&p->park_lock);
	st->blocks_free += spares;
	/*
	 * Allocated pages hold their blocks (io_reserve) and freed ones are
	 * punched, or warm (holding blocks the next allocation reuses, punched
	 * on demand), so a new page costs one page of the backing filesystem
	 * or a warm page (or a spare's, which holds its blocks too): free is
	 * what both allow, and the size what is used plus that.
	 */
	if (p->b[0].fd >= 0 && fstatvfs(p->b[0].fd, &vfs) == 0) {
		uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;

		avail = avail > p->keep_free ? (avail - p->keep_free) / p->page_size : 0;
		avail += __atomic_load_n(&p->warm_pages, __ATOMIC_RELAXED) + cooling + spares;
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

	return ret ? ret : pages_hash_map(p, m, csum, NULL, NULL, 0, NULL);
}

static int pages_checksums(void *arg, const struct kvb_map *m, uint64_t *whole, uint64_t *bypage)
{
	struct pages *p = arg;
	int ret = pages_check_map(p, m);

	return ret ? ret : pages_hash_map(p, m, whole, NULL, NULL, 0, bypage);
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
	pages_warm_seed(p);
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

	/* After the last barrier: the spares are free, not in the snapshot. */
	pages_park_clear(p);
	/* Nothing free keeps blocks past a clean unmount: fsck finds none. */
	pages_cool(p, 1);
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
		if (p->b[i].dfd >= 0)
			close(p->b[i].dfd);
		alloc_release(&p->b[i].a);
		free(p->b[i].warm);
		pthread_mutex_destroy(&p->b[i].lock);
	}
	for (i = 0; i < p->nparked; i++)
		free(p->parked[i].stale);
	free(p->b);
	free(p->freed);
	pthread_mutex_destroy(&p->flock);
	free(p->wruns);
	pthread_mutex_destroy(&p->wlock);
	pthread_mutex_destroy(&p->park_lock);
	pthread_cond_destroy(&p->cooled);
	pthread_mutex_destroy(&p->clock);
	free(p->root);
	if (p->io && p->io->release)
		p->io->release(p->dev);
	free(p);
}

static const struct kvb_ops pages_ops = {
	.obj_open = pages_obj_open,
	.obj_write = pages_obj_write,
	.obj_copy = pages_obj_copy,
	.obj_truncate = pages_obj_truncate,
	.obj_reserve = pages_obj_reserve,
	.reserve_begin = pages_reserve_begin,
	.reserve_end = pages_reserve_end,
	.obj_view = pages_obj_view,
	.obj_dirty = pages_obj_dirty,
	.obj_settle = pages_obj_settle,
	.obj_commit_prepare = pages_obj_commit_prepare,
	.obj_commit_done = pages_obj_commit_done,
	.obj_sums_wanted = pages_obj_sums_wanted,
	.obj_sums_known = pages_obj_sums_known,
	.obj_close = pages_obj_close,
	.obj_adopt = pages_obj_adopt,
	.read = pages_read,
	.read_fd = pages_read_fd,
	.read_verified = pages_read_verified,
	.read_uncached = pages_read_uncached,
	.sync = pages_sync,
	.remove = pages_remove,
	.barrier_begin = pages_barrier_begin,
	.barrier_sync = pages_barrier_sync,
	.release = pages_release,
};

static const struct kvb_admin_ops pages_admin = {
	.name = "pages",
	.start = pages_start,
	.stop = pages_stop,
	.statfs = pages_statfs,
	.describe = pages_describe,
	.checksum = pages_checksum,
	.checksums = pages_checksums,
	.stats = pages_stats,
	.bucket_usage = pages_bucket_usage,
	.tick = pages_tick,
	.free = pages_free,
};

/*
 * Make kvb the pages backend over p (which it then owns).  Over an io that
 * punches, freed runs are warm for a while (runs.c): a warm map per bucket.
 */
static int pages_attach(struct kvb *kvb, struct pages *p, char *err, size_t errlen)
{
	uint32_t i;

	for (i = 0; p->io->punch && i < p->nbuckets; i++) {
		p->b[i].warm = calloc(p->b[i].a.nwords, sizeof(uint64_t));
		if (!p->b[i].warm) {
			snprintf(err, errlen, "out of memory for bitmaps");
			return -ENOMEM;
		}
	}
	kvb_init(kvb, &pages_ops, &pages_admin, p);
	return 0;
}

/* A backend of geometry g, its buckets not yet given storage. */
static int pages_alloc(struct pages **out, const struct kvb_pages_geom *g, char *err, size_t errlen)
{
	struct pages *p;
	uint32_t i;

	if (g->page_size < PAGES_PAGE_SIZE_MIN || (g->page_size & (g->page_size - 1)) ||
	    g->bucket_size < g->page_size || g->bucket_size % g->page_size ||
	    g->bucket_count < 1 || g->bucket_count > PAGES_BUCKETS_MAX) {
		snprintf(err, errlen,
			 "invalid geometry: page_size %llu (a power of two >= %u), bucket_size "
			 "%llu (a multiple of page_size), bucket_count %u (1..%u)",
			 (unsigned long long)g->page_size, PAGES_PAGE_SIZE_MIN,
			 (unsigned long long)g->bucket_size, g->bucket_count, PAGES_BUCKETS_MAX);
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
	pthread_mutex_init(&p->wlock, NULL);
	pthread_mutex_init(&p->park_lock, NULL);
	pthread_mutex_init(&p->clock, NULL);
	pthread_cond_init(&p->cooled, NULL);
	p->warm_delay_ns = PAGES_WARM_DELAY_MS * 1000000ull;
	/* An eighth of the store at most: a small store's warm runs stay small. */
	p->warm_max_pages = PAGES_WARM_MAX / p->page_size;
	if (p->warm_max_pages > p->npages * p->nbuckets / 8)
		p->warm_max_pages = p->npages * p->nbuckets / 8;
	p->b = calloc(p->nbuckets, sizeof(*p->b));
	if (!p->b) {
		free(p);
		return -ENOMEM;
	}
	for (i = 0; i < p->nbuckets; i++) {
		p->b[i].fd = -1;
		p->b[i].dfd = -2; /* not opened yet */
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
	int ret;

	ret = pages_alloc(&p, g, err, errlen);
	if (ret)
		return ret;
	ret = io_open_files(p, root, create, err, errlen);
	if (!ret)
		ret = pages_attach(kvb, p, err, errlen);
	if (ret)
		pages_free(p);
	return ret;
}

int kvb_pages_init_io(struct kvb *kvb, const struct kvb_pages_geom *g,
		      const struct kvb_pages_io *io, void *dev, char *err, size_t errlen)
{
	struct pages *p;
	int ret;

	assert(io->pread && io->pwrite && io->zero && io->sync);
	ret = pages_alloc(&p, g, err, errlen);
	if (ret)
		return ret;
	p->io = io;
	p->dev = dev;
	ret = pages_attach(kvb, p, err, errlen);
	if (ret) {
		p->io = NULL; /* dev is still the caller's */
		pages_free(p);
	}
	return ret;
}

void kvb_pages_set_warm(struct kvb *kvb, uint64_t delay_ms, uint64_t max_bytes)
{
	struct pages *p = kvb->arg;

	p->warm_delay_ns = delay_ms * 1000000ull;
	p->warm_max_pages = max_bytes / p->page_size;
}

void *kvb_pages_io_dev(const struct kvb *kvb)
{
	const struct pages *p = kvb->arg;

	return p->dev;
}
