/*
 * ubsio.c: the KV backend.  Each object's content is one value in a
 * distributed KV store reached through Huawei's UBSIO KV-cache client
 * library (libubsio_kvc.so), loaded with dlopen.
 *
 * Values are immutable: every committed version is put under a key of its
 * own, "<tenant>/<key>#<vid>.<store id>", where vid is a number never
 * reused (it is the mapping's page column) and the store id a random
 * number drawn when the store first starts, so that stores sharing one KV
 * store (one per node, each with its own ROOT) never write or delete each
 * other's values.  So an overwrite never touches the value a
 * reader or the committed record points at; the old value is deleted only
 * after the record that replaced it is durable, as the pages backend frees
 * pages (DESIGN.md, "The ubsio backend").
 *
 * Nothing can list the KV store, so every value that might outlive its
 * record is written down first, in a journal in ROOT: "P vid key" before a
 * put, "D vid key" before a record change lets a value go (both synced
 * before the put or the change), "V vid" after a reset (vids are never
 * reused).  Start deletes every journalled value no record points at, then
 * resets the journal; at run time it is reset whenever nothing in it is
 * still pending.
 *
 * Locks: u->lock guards the value table, the doomed queue, the counters,
 * the read cache and journal appends; each queue's own lock its list.  Library
 * calls are made with neither held.
 */
#include "kvb.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "meta.h"

#define UBS_BATCH 256          /* keys per put, get or delete call */
/*
 * The library's limits (ubsio-kv/src/csrc/kvc/ubsio_kvc.cpp: MAX_KEY_LENGTH,
 * MAX_BATCH_OP_COUNT): a key of 1..255 bytes, 1..16384 keys a batch call.
 */
#define UBS_KEY_MAX 255
#define UBS_EXIST_BATCH 16384
/*
 * Older releases hand BatchGet's values back in pool blocks of their own,
 * 4 MiB each; a longer value is read with Get.
 */
#define UBS_POOL_BLOCK (4ULL << 20)

/* ---- the library ---- */

typedef int32_t (*ubs_init1_fn)(int32_t);
typedef int32_t (*ubs_init2_fn)(int32_t, uint64_t);
typedef void (*ubs_exit_fn)(void);
typedef int32_t (*ubs_get_fn)(const char *, void *, size_t, uint32_t);
typedef bool (*ubs_exist_fn)(const char *, uint32_t);
typedef int32_t (*ubs_getlen_fn)(const char *, size_t *, uint32_t);
typedef int32_t (*ubs_bput_fn)(const char **, uint32_t, void **, size_t *, int *, uint32_t);
typedef int32_t (*ubs_bget_fn)(const char **, uint32_t, void **, size_t *, int *, uint32_t);
typedef int32_t (*ubs_bexist_fn)(const char **, uint32_t, bool *, uint32_t);
typedef int32_t (*ubs_bdel_fn)(const char **, uint32_t, int32_t *, uint32_t);
typedef int32_t (*ubs_bgetlen_fn)(const char **, uint32_t, size_t *, int32_t *, uint32_t);
typedef int32_t (*ubs_bfree_fn)(void **, uint32_t);

/*
 * The symbols used, resolved at load so that a library lacking one is
 * refused at mount rather than failing later.  Exit is optional: older
 * releases do not export it.  BatchGetDirect is never used: it reads into
 * device (NPU) buffers, which a host filesystem has none of.
 */
static const char *const ubs_symbols[] = {
	"UbsioKvCacheInit",       "UbsioKvCacheGet",        "UbsioKvCacheExist",
	"UbsioKvCacheGetLength",  "UbsioKvCacheBatchPut",   "UbsioKvCacheBatchGet",
	"UbsioKvCacheBatchExist", "UbsioKvCacheBatchDelete", "UbsioKvCacheBatchGetLength",
	"UbsioKvCacheBatchFree",  "UbsioKvCacheExit",
};
enum { SYM_INIT, SYM_GET, SYM_EXIST, SYM_GETLEN, SYM_BPUT, SYM_BGET, SYM_BEXIST, SYM_BDELETE,
       SYM_BGETLEN, SYM_BFREE, SYM_EXIT, SYM_N };
#define SYM_REQUIRED SYM_EXIT /* every symbol before this one */

/*
 * One library per process, loaded and initialised once under ubs_lib_lock
 * (the RFC's racy double-checked init), unloaded when the last store using
 * it is released.
 */
static struct {
	pthread_mutex_t lock;
	void *handle;
	void *sym[SYM_N];
	char path[PATH_MAX];
	unsigned users;
	/*
	 * The last library initialised, kept mapped after its last user: the
	 * real library's thread pools outlive Exit and would run unmapped
	 * code after a dlclose (ubsio_kvc_instance.cpp, kv_operation.h).
	 */
	void *kept;
	char kept_path[PATH_MAX];
} ubs_lib = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * Keep h mapped for good, and for reuse by a later load of the same path.
 * A library kept before it, if another, stays mapped too.  Under the lock.
 */
static void ubs_lib_keep(void *h, const char *path)
{
	ubs_lib.kept = h;
	snprintf(ubs_lib.kept_path, sizeof(ubs_lib.kept_path), "%s", path);
}

static int ubs_lib_load(const struct kvb_ubsio_config *c, char *err, size_t errlen)
{
	const char *path = c->lib && *c->lib ? c->lib : KVB_UBSIO_LIB_DEFAULT;
	void *h, *sym[SYM_N];
	int32_t rc;
	int i, ret = 0;

	pthread_mutex_lock(&ubs_lib.lock);
	if (ubs_lib.users) {
		if (strcmp(ubs_lib.path, path)) {
			snprintf(err, errlen, "ubsio library %s is loaded; cannot also load %s",
				 ubs_lib.path, path);
			ret = -EBUSY;
		} else {
			ubs_lib.users++;
		}
		goto out;
	}
	dlerror();
	h = ubs_lib.kept && !strcmp(ubs_lib.kept_path, path) ? ubs_lib.kept
							      : dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "cannot load the ubsio library %s: %s", path, dlerror());
		ret = -ENOENT;
		goto out;
	}
	for (i = 0; i < SYM_N; i++) {
		const char *e;

		dlerror();
		sym[i] = dlsym(h, ubs_symbols[i]);
		e = dlerror();
		if (i >= SYM_REQUIRED && (e || !sym[i])) {
			sym[i] = NULL;
			continue;
		}
		if (e || !sym[i]) {
			snprintf(err, errlen, "ubsio library %s lacks symbol %s: %s", path,
				 ubs_symbols[i], e ? e : "NULL");
			ret = -ENOENT;
			goto out_close;
		}
	}
	/*
	 * Older releases export Init(devId); newer ones Init(devId, ssdSize),
	 * where ssdSize is not read.  devId -1 is no Ascend device: the
	 * library then needs no ACL library (ubsio_kvc_operation.cpp,
	 * KvcOperationInit).
	 */
	if (c->new_init > 0)
		rc = ((ubs_init2_fn)sym[SYM_INIT])(c->device_id, c->ssd_size);
	else
		rc = ((ubs_init1_fn)sym[SYM_INIT])(c->device_id);
	if (rc) {
		snprintf(err, errlen, "%s: UbsioKvCacheInit(%d%s) failed with code %d%s", path,
			 c->device_id, c->new_init > 0 ? ", ssd_size" : "", rc,
			 c->device_id >= 0 ? " (a device id needs Ascend's ACL library; "
					     "ubsio_device=-1 runs without one)" : "");
		ret = -EIO;
		goto out_close;
	}
	ubs_lib.handle = h;
	memcpy(ubs_lib.sym, sym, sizeof(sym));
	snprintf(ubs_lib.path, sizeof(ubs_lib.path), "%s", path);
	ubs_lib.users = 1;
	goto out;

out_close:
	/* Init may have started the library's threads: keep it mapped. */
	ubs_lib_keep(h, path);
out:
	pthread_mutex_unlock(&ubs_lib.lock);
	return ret;
}

static void ubs_lib_unload(void)
{
	pthread_mutex_lock(&ubs_lib.lock);
	if (ubs_lib.users && --ubs_lib.users == 0) {
		/* Exit stops the library's storage client; it is not unmapped. */
		if (ubs_lib.sym[SYM_EXIT])
			((ubs_exit_fn)ubs_lib.sym[SYM_EXIT])();
		ubs_lib_keep(ubs_lib.handle, ubs_lib.path);
		ubs_lib.handle = NULL;
		memset(ubs_lib.sym, 0, sizeof(ubs_lib.sym));
	}
	pthread_mutex_unlock(&ubs_lib.lock);
}

/* Whether a library is in use (for tests): loaded, initialised and not yet let go. */
int kvb_ubsio_lib_in_use(void)
{
	int in_use;

	pthread_mutex_lock(&ubs_lib.lock);
	in_use = ubs_lib.users > 0;
	pthread_mutex_unlock(&ubs_lib.lock);
	return in_use;
}

#define UBS_CALL(idx, type) ((type)ubs_lib.sym[idx])

/*
 * The library's codes, positive (ubsio_kvc_err.h; per-key results and
 * single-key calls pass the storage SDK's through): every one is mapped
 * here and nowhere else.
 */
enum { UBS_OK = 0, UBS_EINVAL = 3, UBS_ERETRY = 5, UBS_ENOTFOUND = 7, UBS_ENOSPC = 10 };

static int ubs_errno(int32_t rc)
{
	switch (rc) {
	case UBS_OK:
		return 0;
	case UBS_ENOTFOUND:
		return -ENOENT;
	case UBS_ENOSPC:
		return -ENOSPC;
	case UBS_EINVAL:
		/* Every argument is checked before a call: this is our bug. */
		fprintf(stderr, "offloadfs: ubsio: the library refused a call's arguments "
				"(code 3): a bug in offloadfs\n");
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* A key and a length the library takes (it fails a whole batch for one that it does not). */
static bool ubs_key_ok(const char *key)
{
	size_t n = key ? strnlen(key, UBS_KEY_MAX + 1) : 0;

	return n >= 1 && n <= UBS_KEY_MAX;
}

/*
 * One batch call over n keys (at most UBS_BATCH), each with its result in
 * res (preset by the caller).  The library fails a whole call for one bad
 * entry and then leaves the results alone (ubsio_kvc.cpp); every entry is
 * checked first, but should a call still fail as a whole, each key is
 * tried in a call of its own so that one key cannot fail the others.
 * Returns how many calls were made.
 */
typedef int32_t (*ubs_batch_fn)(const char **keys, void **bufs, size_t *lens, int *res,
				uint32_t n);

static unsigned ubs_batch_call(ubs_batch_fn call, const char **keys, void **bufs, size_t *lens,
			       int *res, uint32_t n)
{
	unsigned calls = 1;
	uint32_t i;

	if (call(keys, bufs, lens, res, n) == 0 || n == 1)
		return calls;
	for (i = 0; i < n; i++, calls++)
		call(keys + i, bufs ? bufs + i : NULL, lens ? lens + i : NULL, res + i, 1);
	return calls;
}

static int32_t ubs_bput_call(const char **keys, void **bufs, size_t *lens, int *res, uint32_t n)
{
	return UBS_CALL(SYM_BPUT, ubs_bput_fn)(keys, n, bufs, lens, res, 0);
}

static int32_t ubs_bdel_call(const char **keys, void **bufs, size_t *lens, int *res, uint32_t n)
{
	(void)bufs;
	(void)lens;
	return UBS_CALL(SYM_BDELETE, ubs_bdel_fn)(keys, n, res, 0);
}

static int32_t ubs_bget_call(const char **keys, void **bufs, size_t *lens, int *res, uint32_t n)
{
	return UBS_CALL(SYM_BGET, ubs_bget_fn)(keys, n, bufs, lens, res, 0);
}

/* ---- values ---- */

enum ubs_state {
	UBS_WORKING,   /* a writer's data, in its buffer; no value in the store */
	UBS_PUTTING,   /* journalled and being put (or put, commit pending) */
	UBS_COMMITTED, /* a record points at it */
	UBS_DOOMED,    /* to delete at the next release */
};

struct ubs_val {
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
	struct ubs_val *hnext;
};

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
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct ubs_req *head, **tail;
	int busy;               /* a batch is in flight */
};

struct ubs {
	struct kvb_ubsio_config c;
	struct meta *m;
	char *jpath;
	int jfd;
	pthread_mutex_t lock;
	struct ubs_val **tab;
	size_t tabsize, count;
	int loaded;
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
	/*
	 * One journal sync at a time, with its bookkeeping (ubs_jsync): Linux
	 * reports a writeback error to one fdatasync only, so a failure must be
	 * recorded before any later sync can report success.  Taken before
	 * u->lock.
	 */
	pthread_mutex_t jslock;
	int jdirty;             /* lines appended since the last reset */
	uint64_t jgen;          /* bumped by every reset: lines of older ones are gone */
	uint64_t nputting;      /* values between their P line and commit_done */
	uint64_t commit_epoch, barrier_epoch; /* for emptying the journal */
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

struct ubs_get {
	struct ubs_req r;
	const char *key;
	unsigned char *buf;     /* the caller's, len bytes */
	size_t len;
	int rc;
};

static size_t ubs_slot(const struct ubs *u, uint64_t vid)
{
	return (size_t)((vid * 0x9e3779b97f4a7c15ULL) >> 17) & (u->tabsize - 1);
}

static struct ubs_val *ubs_find(struct ubs *u, uint64_t vid)
{
	struct ubs_val *v;

	for (v = u->tab[ubs_slot(u, vid)]; v; v = v->hnext)
		if (v->vid == vid)
			return v;
	return NULL;
}

/* Never fails: without memory to grow, the chains just get longer. */
static void ubs_insert(struct ubs *u, struct ubs_val *v)
{
	size_t i;
	struct ubs_val **nt = NULL;

	if (u->count + 1 > u->tabsize / 2)
		nt = calloc(u->tabsize * 2, sizeof(*nt));
	if (nt) {
		size_t nsize = u->tabsize * 2, osize = u->tabsize;
		struct ubs_val **old = u->tab;

		u->tab = nt;
		u->tabsize = nsize;
		for (i = 0; i < osize; i++) {
			struct ubs_val *e = old[i], *next;

			for (; e; e = next) {
				size_t s = ubs_slot(u, e->vid);

				next = e->hnext;
				e->hnext = nt[s];
				nt[s] = e;
			}
		}
		free(old);
	}
	i = ubs_slot(u, v->vid);
	v->hnext = u->tab[i];
	u->tab[i] = v;
	u->count++;
}

static void ubs_unlink(struct ubs *u, struct ubs_val *v)
{
	struct ubs_val **pp = &u->tab[ubs_slot(u, v->vid)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == v) {
			*pp = v->hnext;
			u->count--;
			return;
		}
	}
}

static void ubs_lru_remove(struct ubs *u, struct ubs_val *v)
{
	if (v->lru_prev)
		v->lru_prev->lru_next = v->lru_next;
	else if (u->lru_head == v)
		u->lru_head = v->lru_next;
	if (v->lru_next)
		v->lru_next->lru_prev = v->lru_prev;
	else if (u->lru_tail == v)
		u->lru_tail = v->lru_prev;
	v->lru_prev = v->lru_next = NULL;
}

static void ubs_lru_front(struct ubs *u, struct ubs_val *v)
{
	ubs_lru_remove(u, v);
	v->lru_next = u->lru_head;
	if (u->lru_head)
		u->lru_head->lru_prev = v;
	u->lru_head = v;
	if (!u->lru_tail)
		u->lru_tail = v;
}

/* Drop v's cached bytes (no reader may be copying). */
static void ubs_uncache(struct ubs *u, struct ubs_val *v)
{
	if (!v->data)
		return;
	ubs_lru_remove(u, v);
	free(v->data);
	v->data = NULL;
	v->verified = 0;
	u->cached -= v->size;
}

/*
 * Keep the cache within its bound, sparing values being read and the most
 * recently used one even when it alone is larger than the bound: a file
 * read in pieces is then still fetched once, not once per piece.
 */
static void ubs_cache_trim(struct ubs *u)
{
	struct ubs_val *v = u->lru_tail, *prev;

	for (; v && v != u->lru_head && u->cached > u->c.cache_max; v = prev) {
		prev = v->lru_prev;
		if (!v->refs)
			ubs_uncache(u, v);
	}
}

static void ubs_val_free(struct ubs *u, struct ubs_val *v)
{
	ubs_uncache(u, v);
	free(v->skey);
	free(v);
}

static struct ubs_val *ubs_val_new(struct ubs *u, uint64_t vid, uint64_t size, const char *skey,
				   enum ubs_state state)
{
	struct ubs_val *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->vid = vid;
	v->size = size;
	v->state = state;
	if (skey && !(v->skey = strdup(skey))) {
		free(v);
		return NULL;
	}
	ubs_insert(u, v);
	return v;
}

/* ---- the journal ---- */

static void ubs_hex(const char *s, char *out)
{
	static const char hx[] = "0123456789abcdef";

	for (; *s; s++) {
		*out++ = hx[(unsigned char)*s >> 4];
		*out++ = hx[(unsigned char)*s & 15];
	}
	*out = '\0';
}

/*
 * Append one line per value: "<tag> <vid> <hex key>\n", tag tags[i] (or
 * tags[0] for all when tags is one letter).  Each value remembers the
 * journal generation its line went into.  Under u->lock or single-threaded.
 */
/*
 * A torn append that could not be cut back: take the length from the file
 * and end the torn line with the next append.  Under u->lock.
 */
static void ubs_journal_lost_length(struct ubs *u)
{
	off_t end = lseek(u->jfd, 0, SEEK_END);

	if (end >= 0)
		u->jlen = end;
	u->jtorn = 1;
}

static int ubs_journal(struct ubs *u, const char *tags, struct ubs_val *const *v, size_t n)
{
	size_t i, len = 0, cap = 0;
	char *buf = NULL;
	ssize_t w;
	int ret = 0;

	for (i = 0; i < n; i++)
		cap += 2 * strlen(v[i]->skey) + 32;
	buf = malloc(cap + 2);
	if (!buf)
		return -ENOMEM;
	if (u->jtorn)
		buf[len++] = '\n'; /* ends a torn line that could not be cut back */
	for (i = 0; i < n; i++) {
		len += (size_t)sprintf(buf + len, "%c %" PRIu64 " ", tags[tags[1] ? i : 0],
				       v[i]->vid);
		ubs_hex(v[i]->skey, buf + len);
		len += strlen(buf + len);
		buf[len++] = '\n';
	}
	w = write(u->jfd, buf, len);
	if (w != (ssize_t)len) {
		ret = w < 0 ? -errno : -EIO;
		/* A torn line would swallow the next append's first line at replay. */
		if (w > 0 && ftruncate(u->jfd, u->jlen)) {
			ubs_journal_lost_length(u);
			ret = -EIO;
		}
	} else {
		u->jlen += (off_t)len;
		u->jdirty = 1;
		u->jtorn = 0;
		for (i = 0; i < n; i++) {
			v[i]->jgen = u->jgen;
			v[i]->jend = u->jlen;
		}
	}
	free(buf);
	return ret;
}

static int ubs_unhex(const char *h, size_t n, char *out)
{
	size_t i;

	if (n % 2)
		return -EINVAL;
	for (i = 0; i < n; i += 2) {
		int a = h[i] >= 'a' ? h[i] - 'a' + 10 : h[i] - '0';
		int b = h[i + 1] >= 'a' ? h[i + 1] - 'a' + 10 : h[i + 1] - '0';

		if (a < 0 || a > 15 || b < 0 || b > 15 || (a == 0 && b == 0))
			return -EINVAL;
		out[i / 2] = (char)(a << 4 | b);
	}
	out[n / 2] = '\0';
	return 0;
}

/* ---- doomed values ---- */

/* Put v on the doomed list (no journal line).  Under u->lock. */
static void ubs_doom_quiet(struct ubs *u, struct ubs_val *v)
{
	v->state = UBS_DOOMED;
	v->obj = NULL;
	v->doom_seq = u->doom_seq++;
	v->dnext = NULL;
	v->dprev = u->doomed_tail;
	if (u->doomed_tail)
		u->doomed_tail->dnext = v;
	else
		u->doomed_head = v;
	u->doomed_tail = v;
	u->ndoomed++;
}

static void ubs_doom_remove(struct ubs *u, struct ubs_val *v)
{
	if (v->dprev)
		v->dprev->dnext = v->dnext;
	else
		u->doomed_head = v->dnext;
	if (v->dnext)
		v->dnext->dprev = v->dprev;
	else
		u->doomed_tail = v->dprev;
	v->dprev = v->dnext = NULL;
	u->ndoomed--;
}

/*
 * v's value is to be deleted once the record change that let go of it is
 * durable.  Its key is normally in the journal already (written, synced,
 * before the record change: its P line, or the D line of commit_prepare or
 * remove_prepare); only when the journal has been reset since is a line
 * added, synced by the next barrier.
 */
static int ubs_doom(struct ubs *u, struct ubs_val *v)
{
	ubs_doom_quiet(u, v);
	return v->jgen == u->jgen ? 0 : ubs_journal(u, "D", &v, 1);
}

/*
 * Delete doomed values with doom_seq < mark (every one when mark is
 * UINT64_MAX).  Values whose delete fails stay doomed for the next round.
 * Returns the checksum pages freed.
 */
static uint64_t ubs_delete_doomed(struct ubs *u, uint64_t mark)
{
	struct ubs_val *batch[UBS_BATCH], *v;
	const char *keys[UBS_BATCH];
	int32_t res[UBS_BATCH];
	uint64_t freed = 0, ps = u->c.page_size, sweep;
	unsigned calls;
	size_t i, n;

	pthread_mutex_lock(&u->lock);
	sweep = ++u->sweep;
	pthread_mutex_unlock(&u->lock);
	for (;;) {
		n = 0;
		pthread_mutex_lock(&u->lock);
		/* Oldest first; each value tried once per pass; never one a reader holds. */
		for (v = u->doomed_head; v && v->doom_seq < mark && n < UBS_BATCH; v = v->dnext) {
			if (v->refs || v->sweep == sweep)
				continue;
			v->sweep = sweep;
			v->deleting = 1;
			v->refs++; /* ours until the delete returns */
			batch[n] = v;
			keys[n++] = v->skey;
		}
		pthread_mutex_unlock(&u->lock);
		if (!n)
			break;
		for (i = 0; i < n; i++)
			res[i] = -1; /* no code of the library's: a call that failed as a whole */
		calls = ubs_batch_call(ubs_bdel_call, keys, NULL, NULL, res, (uint32_t)n);
		pthread_mutex_lock(&u->lock);
		u->st.calls[KVB_CALL_ZERO] += calls;
		for (i = 0; i < n; i++) {
			struct ubs_val *d = batch[i];

			d->refs--;
			d->deleting = 0;
			/*
			 * Deleting a missing key succeeds (and not found would mean gone
			 * already: a put that failed, a replayed journal line).
			 */
			if (res[i] == UBS_OK || res[i] == UBS_ENOTFOUND) {
				u->stored_bytes -= d->size;
				u->stored_keys--;
				u->st.frees++;
				freed += (d->size + ps - 1) / ps;
				ubs_doom_remove(u, d);
				ubs_unlink(u, d);
				ubs_val_free(u, d);
			} else {
				u->st.errors[KVB_CALL_ZERO]++;
				if (!u->logged_delete_fail++)
					fprintf(stderr,
						"offloadfs: ubsio: cannot delete value '%s' (%d); "
						"kept in the journal, retried at the next sync\n",
						d->skey, res[i]);
			}
		}
		pthread_mutex_unlock(&u->lock);
	}
	return freed;
}

/*
 * A journal sync failed.  Linux reports a writeback error to one sync
 * only, so a later sync that succeeds says nothing of the lines written
 * before: count every line as gone (a new generation, without truncating),
 * so that each key is journalled and synced again before it is relied on.
 * Under u->lock.
 */
static void ubs_jsync_failed(struct ubs *u)
{
	struct ubs_val *d[UBS_BATCH], *v;
	size_t n = 0;

	u->jgen++;
	u->jsynced = u->jlen;
	/* Doomed values' lines are counted lost with the rest: write them again. */
	for (v = u->doomed_head; v; v = v->dnext) {
		if (!v->skey)
			continue;
		d[n++] = v;
		if (n == UBS_BATCH) {
			(void)ubs_journal(u, "D", d, n);
			n = 0;
		}
	}
	if (n)
		(void)ubs_journal(u, "D", d, n);
}

/*
 * Make the journal durable up to len in generation gen.  0 when it is;
 * -ESTALE when the generation changed (a reset emptied the journal, or a
 * failed sync counted its lines lost): journal them again; -EIO when the
 * sync failed.  A caller whose lines an earlier sync covered does not sync
 * again.  Called without u->lock.
 */
static int ubs_jsync(struct ubs *u, uint64_t gen, off_t len)
{
	int ret = 0;

	pthread_mutex_lock(&u->jslock);
	pthread_mutex_lock(&u->lock);
	if (u->jgen != gen)
		ret = -ESTALE;
	else if (u->jsynced >= len)
		ret = 1;
	else
		len = u->jlen; /* everything appended so far */
	pthread_mutex_unlock(&u->lock);
	if (!ret) {
		int failed = fdatasync(u->jfd) != 0;

		pthread_mutex_lock(&u->lock);
		if (failed) {
			ubs_jsync_failed(u);
			ret = -EIO;
		} else if (u->jsynced < len) {
			u->jsynced = len; /* gen cannot have changed: resets take jslock */
		}
		pthread_mutex_unlock(&u->lock);
	}
	pthread_mutex_unlock(&u->jslock);
	return ret < 0 ? ret : 0;
}

/*
 * Start the journal afresh: truncate it and write the next vid, so that
 * vids are never reused even after every line naming them is gone.
 * Under u->lock or single-threaded.
 */
static int ubs_journal_reset(struct ubs *u)
{
	char line[40];
	int n = snprintf(line, sizeof(line), "V %" PRIu64 "\n", u->next_vid);

	ssize_t w;

	if (ftruncate(u->jfd, 0))
		return -errno;
	u->jlen = 0;
	u->jsynced = 0;
	u->jgen++;
	w = write(u->jfd, line, (size_t)n);
	if (w != n) {
		/* A torn V line would swallow the next append's first line at replay. */
		if (w > 0 && ftruncate(u->jfd, 0))
			ubs_journal_lost_length(u);
		return -EIO;
	}
	/* The file holds it now, synced or not: appends (and cut-backs) go after it. */
	u->jlen = n;
	u->jtorn = 0;
	if (fdatasync(u->jfd))
		return -EIO;
	u->jsynced = n;
	u->jdirty = 0;
	return 0;
}

/* Empty the journal when nothing in it can still need a delete. */
static void ubs_journal_trim(struct ubs *u)
{
	pthread_mutex_lock(&u->jslock);
	pthread_mutex_lock(&u->lock);
	if (u->jdirty && !u->ndoomed && !u->nputting && u->commit_epoch < u->barrier_epoch) {
		if (ubs_journal_reset(u) == 0) {
			u->logged_delete_fail = 0;
		} else {
			ubs_jsync_failed(u);
			u->jdirty = 1; /* try again at the next release */
		}
	}
	pthread_mutex_unlock(&u->lock);
	pthread_mutex_unlock(&u->jslock);
}

/* ---- batched calls ---- */

/*
 * Queue r and wait until a batch has served it: the first caller in makes
 * the batch call for every request waiting (none waits when alone; many
 * committers or readers share one call).
 */
static void ubs_queue_run(struct ubs *u, struct ubs_queue *q, struct ubs_req *r,
			  void (*batch)(struct ubs *, struct ubs_req *))
{
	pthread_mutex_lock(&q->lock);
	r->next = NULL;
	r->done = 0;
	*q->tail = r;
	q->tail = &r->next;
	while (!r->done) {
		if (!q->busy) {
			struct ubs_req *list = q->head, *it;

			q->head = NULL;
			q->tail = &q->head;
			q->busy = 1;
			pthread_mutex_unlock(&q->lock);
			batch(u, list);
			pthread_mutex_lock(&q->lock);
			for (it = list; it; it = it->next)
				it->done = 1;
			q->busy = 0;
			pthread_cond_broadcast(&q->cond);
		} else {
			pthread_cond_wait(&q->cond, &q->lock);
		}
	}
	pthread_mutex_unlock(&q->lock);
}

static void ubs_queue_init(struct ubs_queue *q)
{
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	q->head = NULL;
	q->tail = &q->head;
	q->busy = 0;
}

static void ubs_queue_destroy(struct ubs_queue *q)
{
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
}

/*
 * Put a batch: journal every key and sync the journal (a crash after the
 * put must find the key to delete it), then the batch calls.
 */
static void ubs_put_batch(struct ubs *u, struct ubs_req *list)
{
	const char *keys[UBS_BATCH];
	void *bufs[UBS_BATCH];
	size_t lens[UBS_BATCH];
	int res[UBS_BATCH];
	struct ubs_put *p[UBS_BATCH], *q[UBS_BATCH];
	struct ubs_req *it = list;
	uint32_t i, n, m;
	unsigned calls;

	while (it) {
		for (n = 0; it && n < UBS_BATCH; it = it->next, n++)
			p[n] = (struct ubs_put *)it;
		/*
		 * Each key's line durable first (one sync covers the batch); a put
		 * whose line a failed sync counted lost is not issued (-EIO).
		 */
		for (i = 0, m = 0; i < n; i++) {
			p[i]->rc = ubs_jsync(u, p[i]->jgen, p[i]->jend);
			if (p[i]->rc == -ESTALE)
				p[i]->rc = -EIO;
			/* The library stores no empty value and no key it cannot take. */
			if (!p[i]->rc && (!ubs_key_ok(p[i]->key) || !p[i]->len || !p[i]->buf))
				p[i]->rc = -EINVAL;
			if (p[i]->rc)
				continue;
			q[m] = p[i];
			keys[m] = p[i]->key;
			bufs[m] = p[i]->buf;
			lens[m] = p[i]->len;
			res[m++] = -1; /* no code of the library's */
		}
		if (!m)
			continue;
		calls = ubs_batch_call(ubs_bput_call, keys, bufs, lens, res, m);
		pthread_mutex_lock(&u->lock);
		u->st.calls[KVB_CALL_WRITE] += calls;
		for (i = 0; i < m; i++) {
			/*
			 * A full cache answers a put with "retry" once the storage
			 * SDK's own retries are spent (boostio's sdk/bio.cpp maps
			 * nothing to "no space"); a put is never of a missing value.
			 */
			q[i]->rc = res[i] == UBS_ERETRY ? -ENOSPC : ubs_errno(res[i]);
			if (q[i]->rc == -ENOENT)
				q[i]->rc = -EIO;
			if (q[i]->rc)
				u->st.errors[KVB_CALL_WRITE]++;
		}
		pthread_mutex_unlock(&u->lock);
	}
}

/* Put one value, batched with every put that arrives while a batch is in flight. */
static int ubs_put(struct ubs *u, struct ubs_put *p)
{
	ubs_queue_run(u, &u->puts, &p->r, ubs_put_batch);
	return p->rc;
}

/* ---- fetching ---- */

/*
 * Take what a successful BatchGet left in *slot for g.  Older releases put
 * a pool block of their own there (4 MiB, given back with BatchFree: the
 * python binding's PyKvcKvBatchGetData at 7e38ed07); current ones fill our
 * buffer, or zero the slot when the key failed (boostio's mirror_client.cpp,
 * releaseValues).  Both are told apart by what came back.
 */
static void ubs_get_collect(struct ubs_get *g, void *got, int res, void **pool, uint32_t *npool)
{
	g->rc = ubs_errno(res);
	if (got == g->buf || !got)
		return;
	if (!g->rc)
		memcpy(g->buf, got, g->len);
	pool[(*npool)++] = got;
}

/*
 * Fetch a batch: values that fit a pool block with BatchGet, longer ones
 * (which older releases cut to a block without a word) one by one with
 * Get.  The lengths asked for are our records' sizes: a current release
 * fails a key whose value is shorter, and neither call says how long the
 * value was.  A call that fails as a whole is retried key by key, each
 * with its own buffer again (a failed call may have zeroed the slots).
 */
static void ubs_get_batch(struct ubs *u, struct ubs_req *list)
{
	const char *keys[UBS_BATCH];
	void *bufs[UBS_BATCH], *pool[UBS_BATCH];
	size_t lens[UBS_BATCH];
	int res[UBS_BATCH];
	struct ubs_get *q[UBS_BATCH];
	struct ubs_req *it = list;
	uint32_t i, m, npool;
	unsigned calls;

	while (it) {
		calls = 0;
		for (m = 0; it && m < UBS_BATCH; it = it->next) {
			struct ubs_get *g = (struct ubs_get *)it;

			if (!ubs_key_ok(g->key) || !g->len || !g->buf) {
				g->rc = -EINVAL;
			} else if (g->len > UBS_POOL_BLOCK) {
				g->rc = ubs_errno(UBS_CALL(SYM_GET, ubs_get_fn)(g->key, g->buf, g->len,
										0));
				calls++;
			} else {
				q[m] = g;
				keys[m] = g->key;
				bufs[m] = g->buf;
				lens[m] = g->len;
				res[m++] = -1;
			}
		}
		npool = 0;
		if (m) {
			calls++;
			if (ubs_bget_call(keys, bufs, lens, res, m) == 0) {
				for (i = 0; i < m; i++)
					ubs_get_collect(q[i], bufs[i], res[i], pool, &npool);
			} else {
				for (i = 0; i < m; i++) {
					bufs[i] = q[i]->buf;
					res[i] = -1;
					if (m > 1 && (calls++, ubs_bget_call(keys + i, bufs + i, lens + i,
									      res + i, 1) == 0))
						ubs_get_collect(q[i], bufs[i], res[i], pool, &npool);
					else
						q[i]->rc = -EIO;
				}
			}
			if (npool)
				UBS_CALL(SYM_BFREE, ubs_bfree_fn)(pool, npool);
		}
		pthread_mutex_lock(&u->lock);
		u->st.calls[KVB_CALL_READ] += calls;
		for (i = 0; i < m; i++)
			if (q[i]->rc)
				u->st.errors[KVB_CALL_READ]++;
		pthread_mutex_unlock(&u->lock);
	}
}

/* Read the value under key, len bytes long, into buf: 0, -ENOENT (gone) or -errno. */
static int ubs_fetch(struct ubs *u, const char *key, unsigned char *buf, size_t len)
{
	struct ubs_get g = { .key = key, .buf = buf, .len = len, .rc = -EIO };

	ubs_queue_run(u, &u->gets, &g.r, ubs_get_batch);
	return g.rc;
}

/*
 * The bytes of committed value v, fetched once into the cache and held
 * with a reference; with pcs, checked page by page first (-EBADMSG, *bad =
 * the first bad page).  -ENOENT: the store no longer has the value (the
 * library evicts by itself).  Under u->lock, which is dropped for the
 * fetch.
 */
static int ubs_hold(struct ubs *u, struct ubs_val *v, const uint64_t *pcs, uint64_t *bad)
{
	unsigned char *buf;
	char *skey;
	int ret;

	if (!v->skey || v->deleting || !v->size || v->size > SIZE_MAX)
		return -EIO;
	v->refs++; /* v cannot be freed while we fetch */
	if (v->data)
		goto check;
	skey = strdup(v->skey);
	buf = malloc((size_t)v->size);
	if (!skey || !buf) {
		free(skey);
		free(buf);
		v->refs--;
		return -ENOMEM;
	}
	pthread_mutex_unlock(&u->lock);
	ret = ubs_fetch(u, skey, buf, (size_t)v->size);
	pthread_mutex_lock(&u->lock);
	if (ret) {
		fprintf(stderr, "offloadfs: ubsio: fetching '%s' (%" PRIu64 " bytes) failed: %s\n",
			skey, v->size, ret == -ENOENT ? "the store has no such value" : strerror(-ret));
		free(skey);
		free(buf);
		v->refs--;
		return ret;
	}
	free(skey);
	if (v->data) {
		free(buf); /* another reader fetched it meanwhile */
	} else {
		v->data = buf;
		u->cached += v->size;
	}
check:
	ubs_lru_front(u, v);
	if (pcs && !v->verified) {
		uint64_t i, ps = u->c.page_size, np = (v->size + ps - 1) / ps;

		for (i = 0; i < np; i++) {
			uint64_t len = v->size - i * ps < ps ? v->size - i * ps : ps;

			if (XXH3_64bits(v->data + i * ps, len) != pcs[i]) {
				*bad = i;
				v->refs--;
				ubs_cache_trim(u);
				return -EBADMSG;
			}
		}
		v->verified = 1;
	}
	return 0;
}

static void ubs_unhold(struct ubs *u, struct ubs_val *v)
{
	v->refs--;
	ubs_cache_trim(u);
}

/*
 * Zero copy: the reply is sent straight from the library's buffer (the
 * RFC's extra memcpy after BatchGetDirect, gone), held until unref.
 */
static ssize_t ubs_read_ref(void *arg, const struct kvb_map *m, const uint64_t *pcs, size_t len,
			    uint64_t off, const void **ptr, void **ref, uint64_t *bad)
{
	struct ubs *u = arg;
	struct ubs_val *v;
	int ret;

	*ptr = NULL;
	*ref = NULL;
	if (m->bucket < 0 || off >= m->size)
		return 0;
	if (len > m->size - off)
		len = (size_t)(m->size - off);
	pthread_mutex_lock(&u->lock);
	v = ubs_find(u, m->page);
	if (!v || (v->obj && v->obj->w == v)) {
		/* Gone, or a writer's buffer: the copying path knows what to do. */
		pthread_mutex_unlock(&u->lock);
		return v ? -EOPNOTSUPP : -EIO;
	}
	ret = ubs_hold(u, v, pcs, bad);
	pthread_mutex_unlock(&u->lock);
	if (ret)
		return ret;
	*ptr = v->data + off;
	*ref = v;
	return (ssize_t)len;
}

static void ubs_read_unref(void *arg, void *ref)
{
	struct ubs *u = arg;

	pthread_mutex_lock(&u->lock);
	ubs_unhold(u, ref);
	pthread_mutex_unlock(&u->lock);
}

/* A copy of committed bytes (through ubs_read_ref), or of a writer's buffer. */
static ssize_t ubs_read_any(struct ubs *u, const struct kvb_map *m, const uint64_t *pcs,
			    void *buf, size_t len, uint64_t off, uint64_t *bad)
{
	const void *ptr;
	struct ubs_val *v;
	void *ref;
	ssize_t n = ubs_read_ref(u, m, pcs, len, off, &ptr, &ref, bad);

	if (n == -EOPNOTSUPP) {
		/* A writer's view: its buffer (the caller holds the writer out). */
		pthread_mutex_lock(&u->lock);
		v = ubs_find(u, m->page);
		if (v && v->obj && v->obj->w == v) {
			struct kvb_obj *o = v->obj;

			n = off < o->size ? (ssize_t)(o->size - off < len ? o->size - off : len) : 0;
			memcpy(buf, o->buf + off, (size_t)n);
		} else {
			n = -EIO;
		}
		pthread_mutex_unlock(&u->lock);
		return n;
	}
	if (n > 0)
		memcpy(buf, ptr, (size_t)n);
	if (ref)
		ubs_read_unref(u, ref);
	return n;
}

static ssize_t ubs_read(void *arg, const struct kvb_map *m, void *buf, size_t len, uint64_t off)
{
	uint64_t bad;

	return ubs_read_any(arg, m, NULL, buf, len, off, &bad);
}

static ssize_t ubs_read_verified(void *arg, const struct kvb_map *m, const uint64_t *pcsums,
				 void *buf, size_t len, uint64_t off, uint64_t *bad_page)
{
	return ubs_read_any(arg, m, pcsums, buf, len, off, bad_page);
}

/* ---- writers ---- */

static int ubs_obj_open(void *arg, const struct kvb_map *c, const char *key, size_t klen,
			struct kvb_obj **out)
{
	struct ubs *u = arg;
	struct kvb_obj *o = calloc(1, sizeof(*o) + klen + 1);

	if (!o)
		return -ENOMEM;
	memcpy(o->key, key, klen);
	o->klen = klen;
	if (c->bucket >= 0) {
		pthread_mutex_lock(&u->lock);
		o->base = ubs_find(u, c->page);
		pthread_mutex_unlock(&u->lock);
		if (!o->base) {
			free(o);
			return -EIO;
		}
		o->base_size = c->size;
	}
	o->size = o->base_size;
	*out = o;
	return 0;
}

/*
 * Count a dirty object of size bytes against the limits and the buffer
 * bound, or say which one it would break.  Under u->lock.
 */
static int ubs_charge(struct ubs *u, struct kvb_obj *o, uint64_t size, uint64_t cap)
{
	uint64_t bytes = u->stored_bytes + u->working_bytes - o->charged + size;
	uint64_t keys = u->stored_keys + u->working_keys - (uint64_t)o->charged_key + (size > 0);

	if (cap > o->cap && u->buffered - o->cap + cap > u->c.buffer_max)
		return cap > u->c.buffer_max ? -EFBIG : -ENOMEM;
	if (size > o->charged && u->c.max_bytes && bytes > u->c.max_bytes)
		return -ENOSPC;
	if (size > 0 && !o->charged_key && u->c.max_keys && keys > u->c.max_keys)
		return -ENOSPC;
	u->working_bytes = u->working_bytes - o->charged + size;
	u->working_keys = u->working_keys - (uint64_t)o->charged_key + (size > 0);
	o->charged = size;
	o->charged_key = size > 0;
	return 0;
}

static void ubs_uncharge(struct ubs *u, struct kvb_obj *o)
{
	u->working_bytes -= o->charged;
	u->working_keys -= (uint64_t)o->charged_key;
	o->charged = 0;
	o->charged_key = 0;
}

/* Make room for size bytes in the buffer, charging the limits.  Under u->lock. */
static int ubs_reserve(struct ubs *u, struct kvb_obj *o, uint64_t size)
{
	uint64_t cap = o->cap;
	unsigned char *nb;
	int ret;

	if (size > cap) {
		cap = cap ? cap : 65536;
		while (cap < size)
			cap = cap > UINT64_MAX / 2 ? size : cap * 2;
		/* Doubling must not be what breaks the bound. */
		if (cap > u->c.buffer_max && size <= u->c.buffer_max)
			cap = u->c.buffer_max;
	}
	ret = ubs_charge(u, o, size, cap);
	if (ret)
		return ret;
	if (cap > o->cap) {
		nb = realloc(o->buf, (size_t)cap);
		if (!nb)
			return -ENOMEM;
		u->buffered += cap - o->cap;
		o->buf = nb;
		o->cap = cap;
	}
	return 0;
}

/* A working value for o's view; under u->lock. */
static int ubs_new_working(struct ubs *u, struct kvb_obj *o)
{
	o->w = ubs_val_new(u, u->next_vid++, 0, NULL, UBS_WORKING);
	if (!o->w)
		return -ENOMEM;
	o->w->obj = o;
	return 0;
}

/*
 * Bring the committed bytes into the buffer before the first change.  The
 * fields obj_view reads (loaded, w, size) change under u->lock only:
 * getattr asks for the view without the inode's data lock.
 */
static int ubs_obj_load(struct ubs *u, struct kvb_obj *o, int keep)
{
	uint64_t bad, size = keep ? o->base_size : 0;
	int ret = 0;

	if (o->loaded)
		return 0;
	pthread_mutex_lock(&u->lock);
	ret = ubs_reserve(u, o, size);
	if (!ret && keep && o->base_size) {
		ret = ubs_hold(u, o->base, NULL, &bad);
		if (ret == -ENOENT)
			ret = -EIO; /* a reader finds the value gone and drops the file */
		if (!ret) {
			memcpy(o->buf, o->base->data, o->base_size);
			ubs_unhold(u, o->base);
		}
	}
	if (!ret)
		ret = ubs_new_working(u, o);
	if (ret) {
		ubs_uncharge(u, o);
	} else {
		o->size = size;
		o->loaded = 1;
	}
	pthread_mutex_unlock(&u->lock);
	return ret;
}

static ssize_t ubs_obj_write(void *arg, struct kvb_obj *o, const void *buf, size_t len,
			     uint64_t off)
{
	struct ubs *u = arg;
	uint64_t end = off + len, size;
	int ret;

	if (len == 0)
		return 0;
	if (end < off || end > (uint64_t)SSIZE_MAX)
		return -EFBIG;
	ret = ubs_obj_load(u, o, 1);
	if (ret)
		return ret;
	size = end > o->size ? end : o->size;
	pthread_mutex_lock(&u->lock);
	ret = ubs_reserve(u, o, size);
	pthread_mutex_unlock(&u->lock);
	if (ret)
		return ret;
	if (off > o->size)
		memset(o->buf + o->size, 0, (size_t)(off - o->size));
	memcpy(o->buf + off, buf, len);
	pthread_mutex_lock(&u->lock);
	o->size = size;
	o->dirty = 1;
	pthread_mutex_unlock(&u->lock);
	return (ssize_t)len;
}

static int ubs_obj_truncate(void *arg, struct kvb_obj *o, uint64_t size)
{
	struct ubs *u = arg;
	int ret;

	/* No change needs no bytes fetched (an ftruncate to the same size). */
	if (!o->loaded && size == o->base_size && (size || !o->base))
		return 0;
	/* Truncating to 0 needs none of the old bytes. */
	ret = ubs_obj_load(u, o, size > 0);
	if (ret)
		return ret;
	if (size == o->size && (size || !o->base))
		return 0;
	pthread_mutex_lock(&u->lock);
	ret = ubs_reserve(u, o, size);
	if (!ret) {
		if (size > o->size)
			memset(o->buf + o->size, 0, (size_t)(size - o->size));
		o->size = size;
		o->dirty = 1;
	}
	pthread_mutex_unlock(&u->lock);
	return ret;
}

static void ubs_obj_view(void *arg, struct kvb_obj *o, struct kvb_map *view)
{
	struct ubs *u = arg;
	uint64_t ps = u->c.page_size;

	memset(view, 0, sizeof(*view));
	pthread_mutex_lock(&u->lock);
	if (!o->loaded) {
		view->bucket = o->base ? 0 : -1;
		view->page = o->base ? o->base->vid : 0;
		view->size = o->base_size;
	} else {
		view->bucket = o->size ? 0 : -1;
		view->page = o->w->vid;
		view->size = o->size;
	}
	pthread_mutex_unlock(&u->lock);
	view->npages = (view->size + ps - 1) / ps;
}

static int ubs_obj_dirty(void *arg, struct kvb_obj *o)
{
	(void)arg;
	return o->dirty;
}

/*
 * "<path>#<vid>.<store id>".  A path too long for the library's keys keeps
 * its head and a hash of the whole: the key stays unique through the vid
 * and the store id, and readable through the head.
 */
static char *ubs_make_key(struct ubs *u, const struct kvb_obj *o, uint64_t vid)
{
	size_t max = u->c.key_max, head = o->klen;
	char suffix[64];
	char *k;
	int sl;

	sl = snprintf(suffix, sizeof(suffix), "#%" PRIu64 ".%s", vid, u->sid);
	if (o->klen + (size_t)sl > max) {
		size_t room = max > (size_t)sl + 20 ? max - (size_t)sl - 18 : 0;

		sl = snprintf(suffix, sizeof(suffix), "~%016llx#%" PRIu64 ".%s",
			      (unsigned long long)XXH64(o->key, o->klen, 0), vid, u->sid);
		head = room < o->klen ? room : o->klen;
	}
	k = malloc(head + (size_t)sl + 1);
	if (!k)
		return NULL;
	memcpy(k, o->key, head);
	memcpy(k + head, suffix, (size_t)sl + 1);
	return k;
}

/*
 * The value put for o->w will never be recorded: doom it (a failed put may
 * have written part of it) and give the writer a fresh working value for
 * the bytes it still holds.  Under u->lock.
 */
/* o's spare (taken by commit_prepare) as its new working value.  Under u->lock. */
static void ubs_take_spare(struct ubs *u, struct kvb_obj *o)
{
	struct ubs_val *nw = o->spare;

	o->spare = NULL;
	nw->vid = u->next_vid++;
	nw->state = UBS_WORKING;
	nw->obj = o;
	ubs_insert(u, nw);
	o->w = nw;
}

static void ubs_abandon(struct ubs *u, struct kvb_obj *o)
{
	struct ubs_val *w = o->w;

	ubs_take_spare(u, o);
	ubs_doom(u, w);
}

static int ubs_obj_commit_prepare(void *arg, struct kvb_obj *o, int sync, struct kvb_map *map,
				  uint64_t *csum, const uint64_t **pcsums)
{
	struct ubs *u = arg;
	uint64_t ps = u->c.page_size, np, i;
	struct ubs_put put = { 0 };
	struct ubs_val *w;
	int ret;

	(void)sync; /* a put is as durable as the KV store makes it; nothing to flush */
	memset(map, 0, sizeof(*map));
	o->put_new = 0;
	ret = ubs_obj_load(u, o, 1);
	if (ret)
		return ret;
	/* Nothing may fail to allocate once the put is out (see ubs_take_spare). */
	if (!o->spare && !(o->spare = calloc(1, sizeof(*o->spare))))
		return -ENOMEM;
	if (o->size == 0) {
		/* The old value's key goes to the journal, synced, before the record lets go. */
		if (o->base) {
			uint64_t gen;
			off_t end;
			int tries = 0;

			pthread_mutex_lock(&u->lock);
			/* As a put's: no reset may take the line before the record changes. */
			u->nputting++;
			o->holding = 1;
			do {
				ret = ubs_journal(u, "D", &o->base, 1);
				gen = u->jgen;
				end = u->jlen;
				pthread_mutex_unlock(&u->lock);
				if (!ret)
					ret = ubs_jsync(u, gen, end);
				pthread_mutex_lock(&u->lock);
			} while (ret == -ESTALE && ++tries < 3); /* a failed sync counted it lost */
			if (ret == -ESTALE)
				ret = -EIO;
			if (ret) {
				u->nputting--;
				o->holding = 0;
			}
			pthread_mutex_unlock(&u->lock);
			if (ret)
				return ret;
		}
		*map = KVB_MAP_EMPTY;
		*csum = XXH3_64bits(NULL, 0);
		*pcsums = NULL;
		return 0;
	}
	np = (o->size + ps - 1) / ps;
	free(o->pcs);
	o->pcs = malloc(np * sizeof(*o->pcs));
	if (!o->pcs)
		return -ENOMEM;
	for (i = 0; i < np; i++)
		o->pcs[i] = XXH3_64bits(o->buf + i * ps, o->size - i * ps < ps ? o->size - i * ps : ps);
	*csum = XXH3_64bits(o->buf, o->size);

	w = o->w;
	pthread_mutex_lock(&u->lock);
	w->skey = ubs_make_key(u, o, w->vid);
	if (!w->skey) {
		pthread_mutex_unlock(&u->lock);
		return -ENOMEM;
	}
	w->size = o->size;
	w->state = UBS_PUTTING;
	u->nputting++;
	u->stored_bytes += w->size;
	u->stored_keys++;
	/*
	 * The new key, and the old one the record will let go of, are in the
	 * journal before the put (ubs_put_batch syncs it first): whatever a
	 * crash keeps of the record change, the next start finds both.
	 */
	{
		struct ubs_val *pd[2] = { w, o->base };

		ret = ubs_journal(u, "PD", pd, o->base ? 2 : 1);
		put.jgen = u->jgen;
		put.jend = u->jlen;
	}
	pthread_mutex_unlock(&u->lock);
	if (!ret) {
		put.key = w->skey;
		put.buf = o->buf;
		put.len = (size_t)o->size;
		ret = ubs_put(u, &put);
	}
	if (ret) {
		/*
		 * The put failed, but part of the value may have been written
		 * (the RFC's orphans after a partial batch): delete the key.
		 */
		pthread_mutex_lock(&u->lock);
		u->nputting--;
		ubs_abandon(u, o);
		pthread_mutex_unlock(&u->lock);
		return ret == -ENOSPC ? -ENOSPC : -EIO;
	}
	o->put_new = 1;
	map->bucket = 0;
	map->page = w->vid;
	map->npages = np;
	map->size = o->size;
	map->skey = w->skey;
	*pcsums = o->pcs;
	return 0;
}

static void ubs_obj_commit_done(void *arg, struct kvb_obj *o, int ok)
{
	struct ubs *u = arg;
	struct ubs_val *w = o->w;

	pthread_mutex_lock(&u->lock);
	if (o->put_new || o->holding)
		u->nputting--;
	o->holding = 0;
	if (ok) {
		/* The record now points at w (or at nothing): the old value goes (journalled). */
		if (o->base)
			ubs_doom(u, o->base);
		o->base = NULL;
		o->base_size = 0;
		if (o->put_new) {
			w->state = UBS_COMMITTED;
			w->obj = NULL;
			o->base = w;
			o->base_size = w->size;
			/* The buffer stays the writer's, under a new working value. */
			ubs_take_spare(u, o);
		}
		if (u->commit_epoch < u->barrier_epoch)
			u->commit_epoch = u->barrier_epoch; /* never shortens a prepare's hold */
		ubs_uncharge(u, o);
		o->dirty = 0;
	} else if (o->put_new) {
		/* The record never pointed at w: its value goes, the writer keeps its bytes. */
		ubs_abandon(u, o);
	}
	o->put_new = 0;
	pthread_mutex_unlock(&u->lock);
}

static void ubs_obj_close(void *arg, struct kvb_obj *o)
{
	struct ubs *u = arg;

	pthread_mutex_lock(&u->lock);
	if (o->w) {
		ubs_unlink(u, o->w);
		ubs_val_free(u, o->w);
	}
	ubs_uncharge(u, o);
	u->buffered -= o->cap;
	pthread_mutex_unlock(&u->lock);
	free(o->spare);
	free(o->buf);
	free(o->pcs);
	free(o);
}

/* ---- committed values ---- */

static int ubs_read_fd(void *arg, const struct kvb_map *m, uint64_t off, size_t len, int *fd,
		       off_t *pos)
{
	(void)arg;
	(void)m;
	(void)off;
	(void)len;
	(void)fd;
	(void)pos;
	return -EOPNOTSUPP;
}

static int ubs_sync(void *arg, const struct kvb_map *m)
{
	(void)arg;
	(void)m;
	return 0;
}

static int ubs_remove(void *arg, const struct kvb_map *m)
{
	struct ubs *u = arg;
	struct ubs_val *v;
	int ret = -ENOENT;

	if (m->bucket < 0)
		return 0;
	pthread_mutex_lock(&u->lock);
	v = ubs_find(u, m->page);
	if (v && v->state == UBS_COMMITTED)
		ret = ubs_doom(u, v);
	pthread_mutex_unlock(&u->lock);
	return ret;
}

/*
 * Before a record naming m is deleted: its key goes to the journal, synced,
 * so that no crash can keep the deletion and lose the key.
 */
static int ubs_remove_prepare(void *arg, const struct kvb_map *m)
{
	struct ubs *u = arg;
	struct ubs_val *v;
	uint64_t gen = 0;
	off_t len = 0;
	int ret = 0, sync = 0, tries = 0;

	if (m->bucket < 0)
		return 0;
	pthread_mutex_lock(&u->lock);
again:
	v = ubs_find(u, m->page);
	/*
	 * Any line of this generation names the key for the start's sweep;
	 * once a sync covers it there is nothing to do.  That makes the call
	 * cheap the second time: fuse/ prepares before it takes its metadata
	 * lock, then again under it, in case a journal reset came between.
	 */
	sync = 0;
	/*
	 * No reset by a barrier that has already begun (its release may be
	 * running now), from before the line is written.  A later barrier's
	 * release comes after its metadata sync, which waits for the metadata
	 * lock the caller holds until the record is deleted and the value
	 * doomed (no reset while anything is doomed).
	 */
	if (u->commit_epoch < u->barrier_epoch)
		u->commit_epoch = u->barrier_epoch;
	if (v && v->skey && (v->jgen != u->jgen || v->jend > u->jsynced)) {
		if (v->jgen != u->jgen)
			ret = ubs_journal(u, "D", &v, 1);
		sync = 1;
		gen = u->jgen;
		len = u->jlen;
	}
	if (sync && !ret) {
		pthread_mutex_unlock(&u->lock);
		ret = ubs_jsync(u, gen, len);
		pthread_mutex_lock(&u->lock);
		/* A failed sync elsewhere counted the line lost: write it again. */
		if (ret == -ESTALE && ++tries < 3) {
			ret = 0;
			goto again;
		}
		if (ret == -ESTALE)
			ret = -EIO;
	}
	if (!ret && u->commit_epoch < u->barrier_epoch)
		u->commit_epoch = u->barrier_epoch; /* and counted from now */
	pthread_mutex_unlock(&u->lock);
	return ret;
}

static int ubs_barrier(void *arg, uint64_t *mark)
{
	struct ubs *u = arg;
	int ret = 0;

	uint64_t gen;
	off_t len;

	pthread_mutex_lock(&u->lock);
	/* Commits done before this point are in the metadata the caller syncs next. */
	u->barrier_epoch++;
	*mark = u->doom_seq;
	gen = u->jgen;
	len = u->jlen;
	pthread_mutex_unlock(&u->lock);
	/*
	 * The D lines of what the records being synced let go of.  After a
	 * failed sync the doomed values' lines were written again: sync those.
	 */
	ret = ubs_jsync(u, gen, len);
	if (ret == -ESTALE) {
		pthread_mutex_lock(&u->lock);
		gen = u->jgen;
		len = u->jlen;
		pthread_mutex_unlock(&u->lock);
		ret = ubs_jsync(u, gen, len);
		if (ret == -ESTALE)
			ret = -EIO;
	}
	pthread_mutex_lock(&u->lock);
	u->st.calls[KVB_CALL_SYNC]++;
	if (ret)
		u->st.errors[KVB_CALL_SYNC]++;
	pthread_mutex_unlock(&u->lock);
	return ret;
}

static uint64_t ubs_release(void *arg, uint64_t mark)
{
	struct ubs *u = arg;
	uint64_t n = ubs_delete_doomed(u, mark);

	ubs_journal_trim(u);
	return n;
}

static int ubs_statfs(void *arg, struct kvb_statfs *st)
{
	struct ubs *u = arg;
	uint64_t ps = u->c.page_size, total, used;

	pthread_mutex_lock(&u->lock);
	/*
	 * A KV store holds bytes, not pages: statfs shows the bytes the
	 * values take (in blocks of page_size), the same count kv_max_bytes
	 * is checked against, so df and ENOSPC agree.
	 */
	used = u->stored_bytes + u->working_bytes;
	/* Without a limit: the ssd size given to Init, else a nominal 1 PiB. */
	total = u->c.max_bytes ? u->c.max_bytes : u->c.ssd_size ? u->c.ssd_size : 1ULL << 50;
	st->block_size = ps;
	st->blocks = total / ps;
	st->blocks_free = used < total ? (total - used) / ps : 0;
	st->files = u->c.max_keys;
	st->files_free = 0;
	if (u->c.max_keys && u->stored_keys + u->working_keys < u->c.max_keys)
		st->files_free = u->c.max_keys - u->stored_keys - u->working_keys;
	pthread_mutex_unlock(&u->lock);
	return 0;
}

/* The descriptor of a value: its key escaped, so that a name cannot add a line. */
static int ubs_describe_key(char *buf, size_t len, const char *skey, uint64_t size)
{
	static const char pre[] = "store=ubsio\nkey=";
	size_t kl;
	int n;

	if (len < sizeof(pre))
		return -ERANGE;
	memcpy(buf, pre, sizeof(pre));
	kl = kvb_desc_escape(buf + sizeof(pre) - 1, len - sizeof(pre) + 1, skey);
	if (kl >= len - sizeof(pre) + 1)
		return -ERANGE;
	kl += sizeof(pre) - 1;
	n = snprintf(buf + kl, len - kl, "\nobject_size=%" PRIu64 "\n", size);
	return n < 0 || (size_t)n >= len - kl ? -ERANGE : (int)kl + n;
}

static int ubs_describe(void *arg, const struct kvb_map *m, char *buf, size_t len)
{
	struct ubs *u = arg;
	struct ubs_val *v;
	int n;

	if (m->bucket < 0) {
		n = snprintf(buf, len, "store=ubsio\nkey=\nobject_size=0\n");
		return n < 0 || (size_t)n >= len ? -ERANGE : n;
	}
	pthread_mutex_lock(&u->lock);
	v = ubs_find(u, m->page);
	/* Lines as the pages backend's: what another client needs to Get the value. */
	n = v && v->skey ? ubs_describe_key(buf, len, v->skey, m->size) : -EIO;
	pthread_mutex_unlock(&u->lock);
	return n;
}

/* Load the value table from the records (current and previous keys). */
static int ubs_load_one(void *ctx, const struct meta_inode *in, const char *skey,
			const char *prev_skey)
{
	struct ubs *u = ctx;
	struct ubs_val *v;

	if (skey && in->bucket >= 0 && !ubs_find(u, in->page)) {
		v = ubs_val_new(u, in->page, in->size, skey, UBS_COMMITTED);
		if (!v)
			return -ENOMEM;
		u->stored_bytes += v->size;
		u->stored_keys++;
	}
	if (prev_skey && in->prev_bucket >= 0 && !ubs_find(u, in->prev_page)) {
		v = ubs_val_new(u, in->prev_page, in->prev_size, prev_skey, UBS_COMMITTED);
		if (!v)
			return -ENOMEM;
		u->stored_bytes += v->size;
		u->stored_keys++;
	}
	if (in->page >= u->next_vid)
		u->next_vid = in->page + 1;
	if (in->prev_page >= u->next_vid)
		u->next_vid = in->prev_page + 1;
	return 0;
}

static void ubs_table_clear(struct ubs *u)
{
	size_t i;

	for (i = 0; i < u->tabsize; i++) {
		struct ubs_val *v = u->tab[i], *next;

		for (; v; v = next) {
			next = v->hnext;
			ubs_val_free(u, v);
		}
		u->tab[i] = NULL;
	}
	u->count = 0;
	u->stored_bytes = u->stored_keys = 0;
	u->ndoomed = 0;
	u->doomed_head = u->doomed_tail = NULL;
}

static int ubs_load(struct ubs *u)
{
	int ret;

	ubs_table_clear(u);
	ret = meta_foreach_value(u->m, ubs_load_one, u);
	u->loaded = !ret;
	return ret;
}

/*
 * Reload the table after recovery and doom every value the records held
 * before it and hold no more (a file unlinked while open, a write that
 * never finished, a version recovery dropped): the pages backend's bitmap
 * rebuild frees those pages; here their keys must be deleted.  Returns how
 * many were doomed.
 */
static int ubs_reload(struct ubs *u, uint64_t *dropped)
{
	struct ubs_val **old = u->tab;
	size_t i, osize = u->tabsize;
	int ret;

	*dropped = 0;
	u->tab = calloc(osize, sizeof(*u->tab));
	if (!u->tab) {
		u->tab = old;
		return -ENOMEM;
	}
	u->count = 0;
	u->stored_bytes = u->stored_keys = 0;
	u->ndoomed = 0;
	u->doomed_head = u->doomed_tail = NULL;
	ret = meta_foreach_value(u->m, ubs_load_one, u);
	for (i = 0; i < osize; i++) {
		struct ubs_val *v = old[i], *next;

		for (; v; v = next) {
			next = v->hnext;
			if (!ret && !ubs_find(u, v->vid)) {
				v->hnext = NULL;
				v->lru_prev = v->lru_next = NULL;
				ubs_insert(u, v);
				ubs_doom_quiet(u, v);
				u->stored_keys++;
				u->stored_bytes += v->size;
				(*dropped)++;
				continue;
			}
			ubs_val_free(u, v);
		}
	}
	free(old);
	return ret;
}

static int ubs_checksum(void *arg, const struct kvb_map *m, uint64_t *csum)
{
	struct ubs *u = arg;
	struct ubs_val *v;
	uint64_t bad;
	int ret;

	if (m->bucket < 0) {
		*csum = XXH3_64bits(NULL, 0);
		return 0;
	}
	/* Recovery checks values before start: read the records now. */
	if (!u->loaded && (ret = ubs_load(u)))
		return ret;
	pthread_mutex_lock(&u->lock);
	v = ubs_find(u, m->page);
	ret = v && v->skey && v->size == m->size ? ubs_hold(u, v, NULL, &bad) : -EIO;
	if (!ret) {
		*csum = XXH3_64bits(v->data, v->size);
		ubs_unhold(u, v);
		/* A one-off pass (fsck, scrub, recovery) need not stay cached. */
		if (!v->refs && v->state != UBS_WORKING)
			ubs_uncache(u, v);
	}
	pthread_mutex_unlock(&u->lock);
	return ret;
}

/*
 * Whether each value is there, UBS_EXIST_BATCH keys a call.  BatchExist
 * tells missing from present; BatchGetLength's lengths are read only for
 * keys it succeeded on (it leaves the others' unset: ubsio_kvc.cpp,
 * UbsioKvCacheBatchGetLength).
 */
static int ubs_probe(void *arg, const struct kvb_map *maps, size_t n, int *res)
{
	struct ubs *u = arg;
	size_t chunk = n < UBS_EXIST_BATCH ? n : UBS_EXIST_BATCH;
	const char **keys = calloc(chunk ? chunk : 1, sizeof(*keys));
	char **owned = calloc(chunk ? chunk : 1, sizeof(*owned));
	bool *ex = calloc(chunk ? chunk : 1, sizeof(*ex));
	size_t *lens = calloc(chunk ? chunk : 1, sizeof(*lens));
	int32_t *lres = calloc(chunk ? chunk : 1, sizeof(*lres));
	size_t i, j, k;
	int ret = 0;

	if (!keys || !owned || !ex || !lens || !lres) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i += k) {
		size_t m = 0;
		int32_t rc, lrc;

		k = n - i < chunk ? n - i : chunk;
		pthread_mutex_lock(&u->lock);
		for (j = 0; j < k; j++) {
			struct ubs_val *v = maps[i + j].bucket >= 0 ? ubs_find(u, maps[i + j].page)
								    : NULL;

			/* A record with no key we could ask for is reported missing. */
			owned[j] = v && v->skey && ubs_key_ok(v->skey) ? strdup(v->skey) : NULL;
			res[i + j] = owned[j] ? -EIO : -ENOENT;
			if (owned[j])
				keys[m++] = owned[j];
		}
		pthread_mutex_unlock(&u->lock);
		if (m) {
			memset(ex, 0, m * sizeof(*ex));
			for (j = 0; j < m; j++)
				lres[j] = -1;
			rc = UBS_CALL(SYM_BEXIST, ubs_bexist_fn)(keys, (uint32_t)m, ex, 0);
			lrc = UBS_CALL(SYM_BGETLEN, ubs_bgetlen_fn)(keys, (uint32_t)m, lens, lres, 0);
			pthread_mutex_lock(&u->lock);
			u->st.calls[KVB_CALL_READ] += 2;
			pthread_mutex_unlock(&u->lock);
			for (j = 0, m = 0; j < k; j++) {
				if (!owned[j])
					continue;
				if (rc)
					res[i + j] = ubs_errno(rc) == -ENOENT ? -EIO : ubs_errno(rc);
				else if (!ex[m])
					res[i + j] = -ENOENT;
				else if (!lrc && lres[m] == UBS_OK)
					res[i + j] = lens[m] == maps[i + j].size ? 0 : -EBADMSG;
				else
					res[i + j] = 0; /* there; its length could not be read */
				m++;
			}
		}
		for (j = 0; j < k; j++)
			free(owned[j]);
	}
out:
	free(keys);
	free(owned);
	free(ex);
	free(lens);
	free(lres);
	return ret;
}

static void ubs_stats(void *arg, struct kvb_stats *st)
{
	struct ubs *u = arg;

	pthread_mutex_lock(&u->lock);
	*st = u->st;
	pthread_mutex_unlock(&u->lock);
}

static int ubs_bucket_usage(void *arg, uint32_t b, uint64_t *used, uint64_t *free_pages,
			    uint64_t *largest_free)
{
	(void)arg;
	(void)b;
	(void)used;
	(void)free_pages;
	(void)largest_free;
	return -ENOENT;
}

/* A D line for every doomed value, synced.  Single-threaded (start). */
static int ubs_journal_doomed(struct ubs *u)
{
	struct ubs_val *d[UBS_BATCH];
	size_t i, n = 0;
	int ret = 0;

	for (i = 0; !ret && i < u->tabsize; i++) {
		for (struct ubs_val *v = u->tab[i]; !ret && v; v = v->hnext) {
			if (v->state != UBS_DOOMED)
				continue;
			d[n++] = v;
			if (n == UBS_BATCH) {
				ret = ubs_journal(u, "D", d, n);
				n = 0;
			}
		}
	}
	if (!ret && n)
		ret = ubs_journal(u, "D", d, n);
	if (!ret && fdatasync(u->jfd))
		ret = -errno;
	return ret;
}

/*
 * Mount: the table from the records, then the journal: every value it
 * names that no record points at is deleted (a put whose commit never
 * happened, a delete that never ran).  Then the journal is emptied.
 */
/*
 * The store id in every key this store puts: read from the store's
 * settings, or drawn and recorded at the first start.  Only its uniqueness
 * matters (each record keeps its whole key), so a store whose record of it
 * was lost draws a new one.
 */
static int ubs_store_id(struct ubs *u, struct meta *m)
{
	char buf[32] = "";
	uint64_t r;
	ssize_t n;

	if (meta_setting_get(m, "ubsio_store_id", buf, sizeof(buf)) == 0 && strlen(buf) == 16 &&
	    strspn(buf, "0123456789abcdef") == 16) {
		memcpy(u->sid, buf, sizeof(u->sid));
		return 0;
	}
	n = getrandom(&r, sizeof(r), 0); /* 8 bytes never come back short */
	if (n != (ssize_t)sizeof(r))
		return n < 0 ? -errno : -EIO;
	snprintf(u->sid, sizeof(u->sid), "%016llx", (unsigned long long)r);
	return meta_setting_set(m, "ubsio_store_id", u->sid);
}

static int ubs_start(void *arg, struct meta *m, int clean, char *msg, size_t msglen)
{
	struct ubs *u = arg;
	uint64_t orphans = 0, lines = 0, dropped = 0;
	char *line = NULL, *key = NULL;
	size_t cap = 0;
	ssize_t len;
	FILE *f;
	int ret, fd;

	u->m = m;
	ret = ubs_store_id(u, m);
	if (ret) {
		snprintf(msg, msglen, "cannot record the store id: %s", strerror(-ret));
		return ret;
	}
	/* After a clean unmount recovery changed nothing: the table read at init stands. */
	ret = clean && u->loaded ? 0 : ubs_reload(u, &dropped);
	if (ret) {
		snprintf(msg, msglen, "cannot read the value keys: %s", strerror(-ret));
		return ret;
	}
	fd = dup(u->jfd);
	f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		snprintf(msg, msglen, "cannot read %s: %s", u->jpath, strerror(errno));
		return -errno;
	}
	rewind(f);
	while ((len = getline(&line, &cap, f)) > 0) {
		char tag, *sp;
		unsigned long long vid;
		struct ubs_val *v;

		if (line[len - 1] == '\n')
			line[--len] = '\0';
		if (line[0] == 'V' && sscanf(line, "V %llu", &vid) == 1) {
			/* The vid high-water mark a reset left: never reuse a vid. */
			if (vid > u->next_vid)
				u->next_vid = vid;
			continue;
		}
		lines++;
		sp = len > 2 ? strchr(line + 2, ' ') : NULL;
		tag = line[0];
		if ((tag != 'P' && tag != 'D') || line[1] != ' ' || !sp ||
		    sscanf(line + 2, "%llu", &vid) != 1) {
			/* A torn last line: its put was never issued (the sync comes first). */
			continue;
		}
		free(key);
		key = malloc((size_t)(len / 2) + 1);
		if (!key || ubs_unhex(sp + 1, strlen(sp + 1), key))
			continue;
		if (vid >= u->next_vid)
			u->next_vid = vid + 1;
		v = ubs_find(u, vid);
		if (v && v->state == UBS_DOOMED && v->skey && strlen(key) > strlen(v->skey) &&
		    strncmp(key, v->skey, strlen(v->skey)) == 0) {
			/*
			 * An earlier line for this vid was torn (its key cut short) and
			 * this one is whole: delete under the whole key.
			 */
			char *k = strdup(key);

			if (!k) {
				ret = -ENOMEM;
				break;
			}
			free(v->skey);
			v->skey = k;
			continue;
		}
		if (v)
			continue; /* a record points at it, or an earlier line named it */
		v = ubs_val_new(u, vid, 0, key, UBS_DOOMED);
		if (!v) {
			ret = -ENOMEM;
			break;
		}
		ubs_doom_quiet(u, v);
		u->stored_keys++;
		orphans++;
	}
	free(line);
	free(key);
	fclose(f);
	/* What recovery dropped is in no journal line yet: write them before deleting. */
	if (!ret && dropped)
		ret = ubs_journal_doomed(u);
	if (ret) {
		snprintf(msg, msglen, "cannot replay %s: %s", u->jpath, strerror(-ret));
		return ret;
	}
	ubs_delete_doomed(u, UINT64_MAX);
	if (u->ndoomed) {
		/* Deletes that failed: the journal keeps a line for each, for the next try. */
		snprintf(msg, msglen,
			 "ubsio %s: %" PRIu64 " values (%" PRIu64 " bytes); %" PRIu64
			 " of %" PRIu64 " orphaned values could not be deleted yet",
			 ubs_lib.path, u->stored_keys - u->ndoomed, u->stored_bytes, u->ndoomed,
			 orphans + dropped);
		return 0;
	}
	ret = ubs_journal_reset(u);
	if (ret) {
		snprintf(msg, msglen, "cannot empty %s: %s", u->jpath, strerror(-ret));
		return ret;
	}
	snprintf(msg, msglen,
		 "ubsio %s: %" PRIu64 " values (%" PRIu64 " bytes) %s; journal: %" PRIu64
		 " lines; %" PRIu64 " orphaned values deleted (%" PRIu64 " journalled, %" PRIu64
		 " dropped by recovery)",
		 ubs_lib.path, u->stored_keys, u->stored_bytes,
		 clean ? "from a clean unmount"
		       : u->stored_keys || lines ? "rebuilt after an unclean stop" : "(none yet)",
		 lines,
		 orphans + dropped, orphans, dropped);
	return 0;
}

static int ubs_stop(void *arg, struct meta *m)
{
	struct ubs *u = arg;

	(void)m;
	/* The caller's barrier made every record durable: every doomed value can go. */
	ubs_delete_doomed(u, UINT64_MAX);
	ubs_journal_trim(u);
	return 0;
}

static void ubs_free(void *arg)
{
	struct ubs *u = arg;

	if (!u)
		return;
	if (u->tab) {
		ubs_table_clear(u);
		free(u->tab);
	}
	if (u->jfd >= 0)
		close(u->jfd);
	free(u->jpath);
	pthread_mutex_destroy(&u->lock);
	ubs_queue_destroy(&u->puts);
	ubs_queue_destroy(&u->gets);
	pthread_mutex_destroy(&u->jslock);
	free(u);
	ubs_lib_unload();
}

static const struct kvb_ops ubs_ops = {
	.name = "ubsio",
	.start = ubs_start,
	.stop = ubs_stop,
	.obj_open = ubs_obj_open,
	.obj_write = ubs_obj_write,
	.obj_truncate = ubs_obj_truncate,
	.obj_view = ubs_obj_view,
	.obj_dirty = ubs_obj_dirty,
	.obj_commit_prepare = ubs_obj_commit_prepare,
	.obj_commit_done = ubs_obj_commit_done,
	.obj_close = ubs_obj_close,
	.read = ubs_read,
	.read_fd = ubs_read_fd,
	.sync = ubs_sync,
	.remove = ubs_remove,
	.remove_prepare = ubs_remove_prepare,
	.barrier = ubs_barrier,
	.release = ubs_release,
	.read_verified = ubs_read_verified,
	.read_ref = ubs_read_ref,
	.read_unref = ubs_read_unref,
	.statfs = ubs_statfs,
	.describe = ubs_describe,
	.checksum = ubs_checksum,
	.stats = ubs_stats,
	.bucket_usage = ubs_bucket_usage,
	.probe = ubs_probe,
	.free = ubs_free,
};

/* ---- a client outside a store (offloadctl scrub) ---- */

int kvb_ubsio_client_open(const struct kvb_ubsio_config *c, char *err, size_t errlen)
{
	return ubs_lib_load(c, err, errlen);
}

ssize_t kvb_ubsio_client_get(const char *key, unsigned char **out)
{
	size_t len = 0;
	unsigned char *buf;
	int32_t rc;

	*out = NULL;
	if (!ubs_key_ok(key))
		return -EINVAL;
	/* GetLength fails alike for a missing key and an error: Exist tells them apart. */
	rc = UBS_CALL(SYM_GETLEN, ubs_getlen_fn)(key, &len, 0);
	if (rc)
		return UBS_CALL(SYM_EXIST, ubs_exist_fn)(key, 0) ? ubs_errno(rc) : -ENOENT;
	if (len == 0 || len > (size_t)SSIZE_MAX)
		return -EIO;
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	rc = UBS_CALL(SYM_GET, ubs_get_fn)(key, buf, len, 0);
	if (rc) {
		free(buf);
		return ubs_errno(rc);
	}
	*out = buf;
	return (ssize_t)len;
}

void kvb_ubsio_client_close(void)
{
	ubs_lib_unload();
}

int kvb_ubsio_init(struct kvb *kvb, const char *root, const struct kvb_ubsio_config *c,
		   struct meta *m, char *err, size_t errlen)
{
	struct ubs *u;
	int ret;

	if (!c->page_size || !c->buffer_max || c->key_max < 64 || c->key_max > UBS_KEY_MAX) {
		snprintf(err, errlen, "ubsio: page_size, kv_buffer_max and a key_max of 64..%d "
				      "are required", UBS_KEY_MAX);
		return -EINVAL;
	}
	ret = ubs_lib_load(c, err, errlen);
	if (ret)
		return ret;
	u = calloc(1, sizeof(*u));
	if (!u) {
		ubs_lib_unload();
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	u->c = *c;
	u->m = m;
	u->jfd = -1;
	u->next_vid = 1;
	u->jgen = 1;
	u->tabsize = 1024;
	ubs_queue_init(&u->puts);
	ubs_queue_init(&u->gets);
	pthread_mutex_init(&u->lock, NULL);
	pthread_mutex_init(&u->jslock, NULL);
	u->tab = calloc(u->tabsize, sizeof(*u->tab));
	if (!u->tab || asprintf(&u->jpath, "%s/%s", root, KVB_UBSIO_JOURNAL) < 0) {
		u->jpath = NULL;
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	/* A read-only user (fsck without --repair) must not create the journal. */
	u->jfd = c->readonly ? open(u->jpath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
			     : open(u->jpath, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
				    0600);
	if (u->jfd < 0 && c->readonly && errno == ENOENT) {
		u->jfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	if (u->jfd < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot open %s: %s", u->jpath, strerror(errno));
		goto fail;
	}
	u->jlen = lseek(u->jfd, 0, SEEK_END);
	if (u->jlen < 0)
		u->jlen = 0;
	if (u->jlen > 0) {
		char last = '\n';

		/* A crash left a torn last line: the next append ends it first. */
		if (pread(u->jfd, &last, 1, u->jlen - 1) == 1 && last != '\n')
			u->jtorn = 1;
	}
	/* The records as they stand before recovery: start frees what it drops. */
	ret = ubs_load(u);
	if (ret) {
		snprintf(err, errlen, "cannot read the value keys: %s", strerror(-ret));
		goto fail;
	}
	kvb->ops = &ubs_ops;
	kvb->arg = u;
	return 0;

fail:
	ubs_free(u);
	return ret;
}
