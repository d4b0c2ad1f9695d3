/*
 * ubsio_int.h: what the files of the ubsio backend share, and nothing
 * outside kvbackend/ubsio/ includes it.
 *
 *   lib.c      the library: dlopen, its symbols, its codes, key checks,
 *              batch calls; one per process (also offloadctl scrub's client)
 *   values.c   the value table and its doomed list, the read cache, the
 *              batching queue and the gets
 *   journal.c  the journal of keys that may need deleting, the puts it
 *              must cover first, and the doomed values it records, deleted
 *              at release
 *   writer.c   a writer's working state: write, truncate, commit
 *   backend.c  the kvb ops: remove, barrier/release, start/stop, probe,
 *              describe, statfs, init/free (the design is told there)
 *
 * Each file calls only those listed above it.
 *
 * Lock order: u->jslock, then u->lock.  A queue's lock and the library's
 * own lock (lib.c) are taken with neither held, and library calls are made
 * with no lock held.
 */
#ifndef OFFLOADFS_UBSIO_INT_H
#define OFFLOADFS_UBSIO_INT_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "htab.h"
#include "kvb.h"

#define UBS_BATCH 256          /* keys per put, get or delete call */
/*
 * The library's limits (ubsio-kv/src/csrc/kvc/ubsio_kvc.cpp: MAX_KEY_LENGTH,
 * MAX_BATCH_OP_COUNT): a key of 1..255 bytes, 1..16384 keys a batch call.
 */
#define UBS_KEY_MAX 255
/* The least key_max a store may set: room for a path's head, the hash, vid and store id. */
#define UBS_KEY_MAX_MIN 64
#define UBS_EXIST_BATCH 16384
/*
 * Older releases hand BatchGet's values back in pool blocks of their own,
 * 4 MiB each; a longer value is read with Get.
 */
#define UBS_POOL_BLOCK (4ULL << 20)
/* A writer's first buffer; it doubles from there. */
#define UBS_BUF_INITIAL 65536
/* The nominal size statfs shows without a limit or an ssd size: 1 PiB. */
#define UBS_NOMINAL_BYTES (1ULL << 50)
/* A per-key result no call of the library's gives: a call that failed as a whole. */
#define UBS_NO_RESULT (-1)

/*
 * The library's codes, positive (ubsio_kvc_err.h; per-key results and
 * single-key calls pass the storage SDK's through): every one is mapped
 * by ubs_errno and nowhere else.
 */
enum { UBS_OK = 0, UBS_EINVAL = 3, UBS_ERETRY = 5, UBS_ENOTFOUND = 7, UBS_ENOSPC = 10 };

/* ---- lib.c ---- */

int ubs_lib_load(const struct kvb_ubsio_config *c, char *err, size_t errlen);
void ubs_lib_unload(void);
/* The path of the library loaded (valid while a store uses it). */
const char *ubs_lib_path(void);
int ubs_errno(int32_t rc);
/* A key the library takes (it fails a whole batch for one that it does not). */
bool ubs_key_ok(const char *key);

/*
 * One batch call over n keys (at most UBS_BATCH), each with its result in
 * res (preset by the caller); see ubs_batch_call.
 */
typedef int32_t (*ubs_batch_fn)(const char **keys, void **bufs, size_t *lens, int *res,
				uint32_t n);
unsigned ubs_batch_call(ubs_batch_fn call, const char **keys, void **bufs, size_t *lens,
			int *res, uint32_t n);
int32_t ubs_bput_call(const char **keys, void **bufs, size_t *lens, int *res, uint32_t n);
int32_t ubs_bdel_call(const char **keys, void **bufs, size_t *lens, int *res, uint32_t n);
int32_t ubs_bget_call(const char **keys, void **bufs, size_t *lens, int *res, uint32_t n);
/* The single calls: Get, BatchFree, BatchExist and BatchGetLength as the library has them. */
int32_t ubs_get_call(const char *key, void *buf, size_t len);
void ubs_bfree_call(void **pool, uint32_t n);
int32_t ubs_bexist_call(const char **keys, uint32_t n, bool *exist);
int32_t ubs_bgetlen_call(const char **keys, uint32_t n, size_t *lens, int32_t *res);

/* ---- values ---- */

enum ubs_state {
	UBS_WORKING,   /* a writer's data, in its buffer; no value in the store */
	UBS_PUTTING,   /* journalled and being put (or put, commit pending) */
	UBS_COMMITTED, /* a record points at it */
	UBS_DOOMED,    /* to delete at the next release */
};

/* Every field under u->lock. */
struct ubs_val {
	struct htab_node hnode; /* in u->tab, keyed by vid */
	uint64_t vid;
	uint64_t size;
	char *skey;             /* NULL while WORKING */
	enum ubs_state state;
	struct kvb_obj *obj;    /* WORKING/PUTTING: the writer whose buffer holds it */
	uint64_t doom_seq;      /* DOOMED: position in the doomed order */
	struct ubs_val *dprev, *dnext; /* DOOMED: the doomed list, in doom order */
	uint64_t sweep;         /* the last delete pass that tried it */
	int deleting;           /* in a BatchDelete now: no new reader may hold it */
	uint64_t jgen;          /* the journal generation holding a line for it (0: none) */
	off_t jend;             /* where that line ends in the journal */
	/* Read cache: the value's bytes, fetched with BatchGet (or Get). */
	unsigned char *data;
	int verified;           /* data matched its page checksums */
	unsigned refs;          /* readers copying out of data */
	struct ubs_val *lru_prev, *lru_next;
};

/*
 * A writer's working state.  The caller (store/) keeps one writer per
 * object; loaded, w and size change under u->lock too, as obj_view reads
 * them without the object's data lock.
 */
struct kvb_obj {
	struct ubs_val *base;   /* the committed value (NULL: empty or none) */
	uint64_t base_size;
	struct ubs_val *w;      /* the working value once loaded */
	/*
	 * Taken by commit_prepare before anything is journalled, so that
	 * commit_done and a failed put can always give the writer a new
	 * working value (no allocation may fail after the put).
	 */
	struct ubs_val *spare;
	unsigned char *buf;
	uint64_t size, cap;
	int loaded, dirty;
	uint64_t charged;       /* bytes counted against the limits (a dirty object's size) */
	int charged_key;
	uint64_t *pcs;          /* per-page sums handed out by commit_prepare */
	int put_new;            /* commit_prepare put w */
	/*
	 * w's bytes are put already (obj_stage: its P line journalled, counted
	 * in nputting until commit_done or its doom) and the buffer is freed;
	 * scsum and pcs are its sums, for the commit.
	 */
	int staged;
	uint64_t scsum;
	int holding;            /* an empty commit's D line holds off resets (nputting) */
	size_t klen;
	char key[];
};

/*
 * A request waiting in a queue (the first member of a put or a get); the
 * queue's lock guards next and done.
 */
struct ubs_req {
	struct ubs_req *next;
	int done;
};

struct ubs_queue {
	pthread_mutex_t lock;   /* guards the rest; taken without u->lock */
	pthread_cond_t cond;
	struct ubs_req *head, **tail;
	int busy;               /* a batch is in flight */
};

struct ubs {
	struct kvb_ubsio_config c; /* set at init, read-only after */
	struct meta *m;         /* read at init and start only, single-threaded */
	char *jpath;
	int jfd;
	/*
	 * One journal sync at a time, with its bookkeeping (ubs_jsync): Linux
	 * reports a writeback error to one fdatasync only, so a failure must be
	 * recorded before any later sync can report success.  Taken before
	 * u->lock.
	 */
	pthread_mutex_t jslock;
	/* Guards everything below (but the queues' lists), and journal appends. */
	pthread_mutex_t lock;
	struct htab tab;        /* struct ubs_val by vid */
	int loaded;             /* tab holds the records */
	uint64_t next_vid;
	char sid[17];           /* the store id in keys: 16 hex digits, set at start */
	/* What the limits count: values in the store and dirty writers' data. */
	uint64_t stored_bytes, stored_keys;
	uint64_t working_bytes, working_keys;
	uint64_t buffered;      /* bytes of writers' buffers */
	/* Doomed values, deleted at release in doom order. */
	uint64_t doom_seq;
	uint64_t ndoomed;
	struct ubs_val *doomed_head, *doomed_tail;
	uint64_t sweep;
	off_t jlen;             /* the journal's length: a torn append is cut back to it */
	off_t jsynced;          /* how much of this generation a sync is known to cover */
	int jtorn;              /* a torn append could not be cut back: start with '\n' */
	int jdirty;             /* lines appended since the last reset */
	uint64_t jgen;          /* bumped by every reset: lines of older ones are gone */
	uint64_t nputting;      /* values between their P line and commit_done */
	uint64_t commit_epoch, barrier_epoch; /* for emptying the journal */
	/*
	 * The journal as barrier_begin saw it, for barrier_sync to make
	 * durable: every value doomed before the mark has its line there.
	 */
	uint64_t barrier_jgen;
	off_t barrier_jlen;
	/* Read cache, most recent first. */
	struct ubs_val *lru_head, *lru_tail;
	uint64_t cached;
	/* Put and get queues: the first caller in makes the batch call for all waiting. */
	struct ubs_queue puts, gets;
	struct kvb_stats st;
	int logged_delete_fail;
};

struct ubs_put {
	struct ubs_req r;
	const char *key;
	void *buf;
	size_t len;
	uint64_t jgen;          /* where its P (and D) lines are: durable before the put */
	off_t jend;
	int rc;
};

/* ---- values.c ---- */

struct ubs_val *ubs_find(struct ubs *u, uint64_t vid);
void ubs_insert(struct ubs *u, struct ubs_val *v);
void ubs_unlink(struct ubs *u, struct ubs_val *v);
void ubs_uncache(struct ubs *u, struct ubs_val *v);
void ubs_val_free(struct ubs *u, struct ubs_val *v);
struct ubs_val *ubs_val_new(struct ubs *u, uint64_t vid, uint64_t size, const char *skey,
			    enum ubs_state state);
void ubs_doom_quiet(struct ubs *u, struct ubs_val *v);
void ubs_doom_remove(struct ubs *u, struct ubs_val *v);
void ubs_queue_init(struct ubs_queue *q);
void ubs_queue_destroy(struct ubs_queue *q);
void ubs_queue_run(struct ubs *u, struct ubs_queue *q, struct ubs_req *r,
		   void (*batch)(struct ubs *, struct ubs_req *));
int ubs_hold(struct ubs *u, struct ubs_val *v, const uint64_t *pcs, uint64_t *bad);
void ubs_unhold(struct ubs *u, struct ubs_val *v);
ssize_t ubs_read_ref(void *arg, const struct kvb_map *m, const uint64_t *pcs, size_t len,
		     uint64_t off, const void **ptr, void **ref, uint64_t *bad);
void ubs_read_unref(void *arg, void *ref);
ssize_t ubs_read(void *arg, const struct kvb_map *m, void *buf, size_t len, uint64_t off);
ssize_t ubs_read_verified(void *arg, const struct kvb_map *m, const uint64_t *pcsums,
			  void *buf, size_t len, uint64_t off, uint64_t *bad_page);
void ubs_table_clear(struct ubs *u);
int ubs_load(struct ubs *u);
int ubs_reload(struct ubs *u, uint64_t *dropped);

/* ---- journal.c ---- */

int ubs_journal(struct ubs *u, const char *tags, struct ubs_val *const *v, size_t n);
int ubs_jsync(struct ubs *u, uint64_t gen, off_t len);
int ubs_journal_reset(struct ubs *u);
void ubs_journal_trim(struct ubs *u);
int ubs_journal_doomed(struct ubs *u);
int ubs_journal_replay(struct ubs *u, uint64_t *lines, uint64_t *orphans, char *msg,
		       size_t msglen);
int ubs_doom(struct ubs *u, struct ubs_val *v);
uint64_t ubs_delete_doomed(struct ubs *u, uint64_t mark);
int ubs_put(struct ubs *u, struct ubs_put *p);

/* ---- writer.c ---- */

int ubs_obj_open(void *arg, const struct kvb_map *c, const char *key, size_t klen,
		 struct kvb_obj **out);
ssize_t ubs_obj_write(void *arg, struct kvb_obj *o, const void *buf, size_t len, uint64_t off);
int ubs_obj_truncate(void *arg, struct kvb_obj *o, uint64_t size);
void ubs_obj_view(void *arg, struct kvb_obj *o, struct kvb_map *view);
int ubs_obj_dirty(void *arg, struct kvb_obj *o);
int ubs_obj_commit_prepare(void *arg, struct kvb_obj *o, int sync, struct kvb_map *map,
			   uint64_t *csum, const uint64_t **pcsums);
void ubs_obj_commit_done(void *arg, struct kvb_obj *o, int ok);
void ubs_obj_close(void *arg, struct kvb_obj *o);
int ubs_obj_stage(void *arg, struct kvb_obj *o);

#endif
