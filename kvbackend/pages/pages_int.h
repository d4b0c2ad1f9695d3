/*
 * pages_int.h: what the files of the pages backend share, and nothing
 * outside kvbackend/pages/ includes it.
 *
 *   backend.c  the kvb ops on committed objects, mount and unmount,
 *              making a backend (the working-state rules are told there)
 *   writer.c   a writer's working state: write, truncate, reserve, settle,
 *              commit, with the lazy copy-on-write
 *   runs.c     page runs (allocation, frees after the barrier, the punch
 *              of runs that stayed free), copies between runs, and the
 *              checksums of a run's bytes
 *   io.c       the bucket I/O every call goes through (counted for
 *              metrics), whole reads and writes, and the bucket files
 *
 * Each file calls only those listed below it.
 *
 * Lock order: an object's fill_lock, then a bucket's lock, then clock
 * (taken with nothing else too).  flock and wlock are never held with a
 * bucket's lock, nor with each other; park_lock with no other.  The
 * counters are atomics.
 */
#ifndef OFFLOADFS_PAGES_INT_H
#define OFFLOADFS_PAGES_INT_H

#include <assert.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvb_hash.h"

#include "alloc.h"
#include "kvb.h"
#include "pages_io.h"

/* Bytes copied or hashed per read of a run. */
#define PAGES_COPY_CHUNK (1u << 20)
/* A write of a spare run this large starts its write-out at once (io_writeback). */
#define PAGES_WRITEBACK_MIN (256u << 10)
/* The geometry a store may have (kvb_pages_init_io checks it). */
#define PAGES_PAGE_SIZE_MIN 512u
#define PAGES_BUCKETS_MAX 256u
/* The freed list's first allocation, in runs; it doubles from there. */
#define PAGES_FREED_INITIAL 64
/* Spare runs kept for closed writers: at most this many, and 1/PAGES_PARKED_SHARE of the pages. */
#define PAGES_PARKED_MAX 16
#define PAGES_PARKED_SHARE 16
/* A hasher's first array of page sums; it doubles from there. */
#define PAGES_PCS_INITIAL 16
/*
 * A freed run keeps its disk blocks (and its pages in the page cache) for
 * the next allocation, which writes it warm, until it has stayed free this
 * long, or until free runs holding blocks pass PAGES_WARM_MAX bytes (at
 * most an eighth of the store): then it is punched.
 */
#define PAGES_WARM_DELAY_MS 5000u
#define PAGES_WARM_MAX (1ull << 30)

struct pages_bucket {
	pthread_mutex_t lock; /* guards a, warm and cooling */
	struct alloc a;
	/* Bit per page: free and still holding its disk blocks (NULL: no punch). */
	uint64_t *warm;
	uint64_t cooling;     /* warm pages held allocated while they are punched */
	int fd;             /* bucket files: the file; -1 over another kvb_pages_io */
	int dfd;            /* the file opened O_DIRECT at its first uncached read; -1: none */
	int dirty;          /* written since the last barrier (atomic) */
};

/* A closed writer's spare run (writer.c), beside the committed run c it was kept for. */
struct pages_parked {
	struct kvb_map c, spare;
	uint64_t *stale;
	uint64_t n, epoch;
};

/* A committed run whose record is gone: reusable after the next barrier. */
struct pages_freed {
	int32_t bucket;
	uint64_t page, npages;
};

/* A run freed with its blocks kept, in the order of freeing (see runs.c). */
struct pages_warm_run {
	int32_t bucket;
	uint64_t page, npages;
	uint64_t freed_ns;  /* CLOCK_MONOTONIC */
};

struct pages {
	const struct kvb_pages_io *io;
	void *dev;              /* io's argument: p itself for bucket files */
	char *root;
	uint64_t page_size;
	uint64_t bucket_size;
	uint64_t npages;
	uint32_t nbuckets;
	uint64_t keep_free;     /* bytes of the filesystem allocations leave free */
	struct pages_bucket *b;
	struct kvb_stats st;    /* updated with atomics */
	pthread_mutex_t flock;  /* guards the freed list */
	struct pages_freed *freed;
	uint64_t nfreed, freed_cap;
	pthread_mutex_t wlock;  /* guards the warm list */
	struct pages_warm_run *wruns;
	uint64_t nwruns, wruns_cap;
	uint64_t warm_pages;    /* warm bits set, all buckets (atomic) */
	/* Runs held allocated for their punch, and punches done: under clock, with cooled. */
	pthread_mutex_t clock;
	pthread_cond_t cooled;
	uint64_t ncooling, ncooled;
	uint64_t warm_delay_ns, warm_max_pages; /* set at creation (tests: shorter) */
	int no_copy;            /* io->copy cannot copy here: read and write (atomic) */
	/*
	 * Barriers begun, and the count as of the last one released (both
	 * guarded by flock; a release follows its own barrier): a working
	 * state's spare run is reusable once a barrier begun after the commit
	 * that superseded it has been released.
	 */
	uint64_t barriers_begun, barriers_released;
	/*
	 * Spare runs of writers that closed, so that a writer that opens the
	 * object again (an mmap stressor, a client that rewrites in place)
	 * finds it; dropped when that object's committed run changes or goes,
	 * when space runs short, and at unmount.
	 */
	pthread_mutex_t park_lock; /* guards parked, nparked (also read as a hint), parked_pages */
	struct pages_parked parked[PAGES_PARKED_MAX];
	unsigned nparked;
	uint64_t parked_pages;
	/*
	 * Open writers holding a spare run (linked through sp_next, sp_prev),
	 * how many (also read as a hint) and their pages, under park_lock:
	 * given up for room, as parked spares are.
	 */
	struct kvb_obj *spares;
	unsigned nspares;
	uint64_t spare_pages;
};

/* Whole-object and per-page XXH3-64 of a byte stream fed in order. */
struct pages_hasher {
	XXH3_state_t *whole, *page;
	uint64_t done;     /* bytes fed */
	uint64_t *pcs;     /* sums of the completed pages */
	uint64_t cap;
};

/* A writer's working state; the caller (store/) keeps one writer per object. */
struct kvb_obj {
	struct kvb_map c;  /* committed mapping */
	struct kvb_map w;  /* working run and size */
	struct kvb_map pending; /* mapping handed out by commit_prepare */
	int dirty;
	/* Sequential writes from 0 are hashed as they arrive; else re-read at commit. */
	struct pages_hasher h;
	int hash_ok;
	uint64_t *pcs;     /* per-page sums handed out by commit_prepare */
	/* Adopted with the writer's sums (in pcs) for this size: commit_prepare reads nothing. */
	int given;
	uint64_t given_size, given_csum;
	/* Lazy copy-on-write (see backend.c): src.bucket -1 when none. */
	struct kvb_map src;
	uint64_t *filled;  /* bit per page below src.size: the working run holds it */
	uint64_t unfilled;
	pthread_mutex_t fill_lock; /* readers settle the view under a shared data lock */
	/*
	 * Pages below diff_n (c's pages) whose working bytes may differ from
	 * c's, while diff_ok (no truncate, adopt or failed write since c was
	 * committed); NULL: none yet.  pcs_c: pcs holds c's page sums.
	 */
	uint64_t *diff;
	uint64_t diff_n;
	int diff_ok, pcs_c;
	/*
	 * The run of the version before c, kept after a commit for the next
	 * copy-on-write: it holds that version, which differs from c only in
	 * the pages set in spare_stale and those at or past spare_n, so only
	 * those are copied.  Reusable once ready (pages_spare_ready).
	 */
	struct kvb_map spare;
	uint64_t *spare_stale;
	uint64_t spare_n, spare_epoch;
	/* The spare's fields are used under park_lock: another writer may take it for room. */
	struct kvb_obj *sp_next, *sp_prev;
	/*
	 * The working run is the spare written again: the writer syncs (an
	 * msync, an fsync loop), so large writes start their write-out early.
	 */
	int rewrite;
	size_t klen;
	char key[];
};

static inline void pages_count(struct pages *p, enum kvb_call c, int failed)
{
	__atomic_add_fetch(&p->st.calls[c], 1, __ATOMIC_RELAXED);
	if (failed)
		__atomic_add_fetch(&p->st.errors[c], 1, __ATOMIC_RELAXED);
}

static inline uint64_t pages_for(const struct pages *p, uint64_t size)
{
	return (size + p->page_size - 1) / p->page_size;
}

static inline uint64_t pages_byte(const struct pages *p, const struct kvb_map *m, uint64_t off)
{
	return m->page * p->page_size + off;
}

/* ---- io.c ---- */

ssize_t io_pread(struct pages *p, uint32_t b, void *buf, size_t len, uint64_t off);
int io_read_uncached(struct pages *p, uint32_t b, void *buf, size_t len, uint64_t off);
ssize_t io_pwrite(struct pages *p, uint32_t b, const void *buf, size_t len, uint64_t off);
int io_zero(struct pages *p, uint32_t b, uint64_t off, uint64_t len);
int io_sync(struct pages *p, uint32_t b);
int io_reserve(struct pages *p, uint32_t b, uint64_t page, uint64_t n);
void io_punch(struct pages *p, uint32_t b, uint64_t page, uint64_t n);
int io_copy(struct pages *p, uint32_t fb, uint64_t from, uint32_t tb, uint64_t to, uint64_t len,
	    uint64_t *done);
void io_writeback(struct pages *p, uint32_t b, uint64_t off, uint64_t len);
void io_willneed(struct pages *p, uint32_t b, uint64_t off, uint64_t len);
int pages_write_all(struct pages *p, uint32_t b, const void *buf, size_t len, uint64_t off);
int pages_read_all(struct pages *p, uint32_t b, void *buf, size_t len, uint64_t off);
int io_open_files(struct pages *p, const char *root, int create, char *err, size_t errlen);
int io_short(struct pages *p, uint64_t held);
int io_next_data(struct pages *p, uint32_t b, uint64_t off, uint64_t *s, uint64_t *e);

/* ---- runs.c ---- */

int pages_free_run(struct pages *p, int32_t b, uint64_t page, uint64_t n);
void pages_cool(struct pages *p, int all);
void pages_warm_seed(struct pages *p);
int pages_free_later(struct pages *p, int32_t b, uint64_t page, uint64_t n);
int pages_alloc_run(struct pages *p, const char *key, size_t klen, uint64_t n,
		    struct kvb_map *out);
int pages_extend_run(struct pages *p, struct kvb_map *m, uint64_t n);
int pages_reserve_begin(void *arg);
void pages_defer_arm(struct pages *p, int on);
void pages_reserve_end(void *arg, struct kvb_obj *const *objs, size_t nobj, int *errs);
int pages_copy_at(struct pages *p, const struct kvb_map *from, const struct kvb_map *to,
		  uint64_t off, uint64_t len);
int pages_copy_range(struct pages *p, const struct kvb_map *from, uint64_t from_off,
		     const struct kvb_map *to, uint64_t to_off, uint64_t len);
int hasher_init(struct pages_hasher *h);
void hasher_release(struct pages_hasher *h);
int hasher_feed(struct pages_hasher *h, uint64_t ps, const char *buf, size_t len);
void hasher_result(const struct pages_hasher *h, uint64_t ps, uint64_t *csum, uint64_t *pcs);
int pages_hash_map(struct pages *p, const struct kvb_map *m, uint64_t *csum, uint64_t *pcs,
		   const uint64_t *diff, uint64_t nknown, uint64_t *bypage);

/* ---- writer.c ---- */

int pages_obj_open(void *arg, const struct kvb_map *c, const char *key, size_t klen,
		   struct kvb_obj **out);
ssize_t pages_obj_write(void *arg, struct kvb_obj *o, const void *buf, size_t len,
			uint64_t off);
ssize_t pages_obj_copy(void *arg, struct kvb_obj *o, const struct kvb_map *from, uint64_t from_off,
		       size_t len, uint64_t off);
int pages_obj_truncate(void *arg, struct kvb_obj *o, uint64_t size);
int pages_obj_reserve(void *arg, struct kvb_obj *o, uint64_t size);
void pages_obj_view(void *arg, struct kvb_obj *o, struct kvb_map *view);
int pages_obj_adopt(void *arg, struct kvb_obj *o, uint64_t size, const uint64_t *pcs,
		    uint64_t csum);
int pages_obj_settle(void *arg, struct kvb_obj *o, uint64_t off, uint64_t len);
int pages_obj_dirty(void *arg, struct kvb_obj *o);
int pages_obj_commit_prepare(void *arg, struct kvb_obj *o, int sync, struct kvb_map *map,
			     uint64_t *csum, const uint64_t **pcsums);
void pages_obj_commit_done(void *arg, struct kvb_obj *o, int ok);
uint64_t pages_obj_sums_wanted(void *arg, struct kvb_obj *o);
void pages_obj_sums_known(void *arg, struct kvb_obj *o, const struct kvb_map *of,
			  const uint64_t *pcs, uint64_t n);
void pages_obj_close(void *arg, struct kvb_obj *o);
void pages_park_forget(struct pages *p, const struct kvb_map *c);
void pages_park_clear(struct pages *p);

#endif
