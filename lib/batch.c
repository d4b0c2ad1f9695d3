/*
 * batch.c: the client side of the batch control file (offloadfs_batch.h,
 * wire format in offloadfs_batch_proto.h).
 */
#include "offloadfs_batch.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>
#ifdef OFS_XXH_DISPATCH
#include <xxh_x86dispatch.h> /* XXH3 on AVX2 or AVX-512 where the CPU has them */
#endif

#include "offloadfs_batch_proto.h"

/*
 * Whether a value's bytes match the checksum its lookup gave: the XXH3-64
 * of the bytes, or, for a version committed after writes in place, the
 * XXH3-64 of its page sums (each page's XXH3-64, the last page cut at
 * the size, as 64-bit little-endian integers), docs/batch.md.  The
 * bytes' sum first: one pass for every value a put wrote.
 */
static int csum_matches(const unsigned char *buf, size_t len, size_t ps, uint64_t csum)
{
	XXH3_state_t st;
	size_t at;

	if (XXH3_64bits(buf, len) == csum)
		return 1;
	XXH3_64bits_reset(&st);
	for (at = 0; at < len; at += ps) {
		uint64_t v = XXH3_64bits(buf + at, len - at < ps ? len - at : ps);
		unsigned char le[8];
		int i;

		for (i = 0; i < 8; i++)
			le[i] = (unsigned char)(v >> (8 * i));
		XXH3_64bits_update(&st, le, sizeof(le));
	}
	return XXH3_64bits_digest(&st) == csum;
}

#define BATCH_KEYS 1024u /* per request */
#define BATCH_BUCKETS 256u
/*
 * Descriptors kept per tenant (in sets of BATCH_KEEP_WAYS by the key's
 * hash, the oldest replaced), and for how long: a kept descriptor is used
 * without asking the daemon, which then does not see the use; looked up
 * again after this long, a key read often stays recent for eviction.
 */
#define BATCH_KEEP_SLOTS 16384u
#define BATCH_KEEP_WAYS 8u
#define BATCH_KEEP_NS ((uint64_t)OFS_BATCH_KEEP_S * 1000000000ull)

struct batch_kept {
	char *key;        /* NULL: empty slot */
	uint64_t hash;
	uint64_t taken;   /* CLOCK_MONOTONIC ns */
	struct offloadfs_desc d; /* fd not kept: looked up from bucket */
	int32_t bucket;
};

struct offloadfs_batch {
	pthread_mutex_t lock;   /* one request (write, then read) at a time */
	char *dir;
	int ctl;
	uint64_t page_size;
	uint32_t bucket_count;
	char root[4096];
	pthread_mutex_t fdlock; /* fds */
	int fds[BATCH_BUCKETS];
	struct offloadfs_batch *next; /* the per-process cache of tenants */
	char *req;              /* request buffer, OFS_BATCH_REQ_MAX bytes; lock */
	char *reply;            /* reply buffer; lock */
	size_t replycap;
	size_t rlen;            /* bytes of reply the last call received; 0 when it failed */
	int verify;             /* the store checks what it reads: get_many too */
	int commit_verify;      /* OFFLOADFS_VERIFY=1: every commit has the pages read back */
	int csum_ok;            /* the daemon takes the whole sums (OFS_BATCH_CSUM) */
	const struct ofs_batch_epochs *ep; /* mapped read-only; NULL: none */
	pthread_mutex_t keeplock; /* kept */
	struct batch_kept *kept;  /* BATCH_KEEP_SLOTS; NULL without ep */
};

static ssize_t full_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static ssize_t full_pread(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/*
 * Send the request in b->req (len bytes) and read a reply of up to
 * replylen bytes into b->reply: the batch's status, or -errno.
 */
static int batch_call(struct offloadfs_batch *b, size_t len, size_t replylen)
{
	struct ofs_batch_hdr *hdr;
	ssize_t n;

	/* A reply that failed whole has no entries: nothing of an earlier one may stand for them. */
	b->rlen = 0;
	if (replylen > b->replycap) {
		char *r = realloc(b->reply, replylen);

		if (!r)
			return -ENOMEM;
		b->reply = r;
		b->replycap = replylen;
	}
	n = pwrite(b->ctl, b->req, len, 0);
	if (n < 0)
		return -errno;
	if ((size_t)n != len)
		return -EIO;
	n = full_pread(b->ctl, b->reply, replylen, 0);
	if (n < 0)
		return (int)n;
	hdr = (void *)b->reply;
	if ((size_t)n < sizeof(*hdr) || hdr->magic != OFS_BATCH_MAGIC || hdr->len != (size_t)n)
		return -EIO;
	b->rlen = (size_t)n;
	return hdr->status;
}

/* 1 when the last reply holds entry k of entsize bytes. */
static int reply_has(const struct offloadfs_batch *b, size_t k, size_t entsize)
{
	return sizeof(struct ofs_batch_hdr) + (k + 1) * entsize <= b->rlen;
}

/*
 * Fill b->req with an op over keys [0, n) that fit: *taken of them.
 * sizes and pcs may be NULL.
 */
static size_t batch_build(struct offloadfs_batch *b, int op, int flags, const char *const *keys,
			  const size_t *sizes, const uint64_t *const *pcs, size_t n, size_t *taken)
{
	struct ofs_batch_hdr *hdr = (void *)b->req;
	size_t pos = sizeof(*hdr), i;

	for (i = 0; i < n && i < BATCH_KEYS; i++) {
		struct ofs_batch_ent e = { 0 };
		size_t klen = strlen(keys[i]), need;

		e.klen = (uint32_t)klen;
		e.size = sizes ? sizes[i] : 0;
		e.npcs = pcs ? (uint32_t)((e.size + b->page_size - 1) / b->page_size) : 0;
		if (pcs && (flags & OFS_BATCH_CSUM))
			e.npcs++; /* the whole content's */
		need = sizeof(e) + ofs_batch_pad8(e.klen) + (size_t)e.npcs * 8;
		if (pos + need > OFS_BATCH_REQ_MAX)
			break;
		memcpy(b->req + pos, &e, sizeof(e));
		pos += sizeof(e);
		memset(b->req + pos, 0, ofs_batch_pad8(e.klen));
		memcpy(b->req + pos, keys[i], klen);
		pos += ofs_batch_pad8(e.klen);
		if (e.npcs) {
			memcpy(b->req + pos, pcs[i], (size_t)e.npcs * 8);
			pos += (size_t)e.npcs * 8;
		}
	}
	memset(hdr, 0, sizeof(*hdr));
	hdr->magic = OFS_BATCH_MAGIC;
	hdr->op = (uint16_t)op;
	hdr->flags = (uint16_t)flags;
	hdr->n = (uint32_t)i;
	hdr->len = (uint32_t)pos;
	*taken = i;
	return pos;
}

static int bucket_fd(struct offloadfs_batch *b, int32_t bucket)
{
	char path[4200];
	int fd;

	if (bucket < 0 || (uint32_t)bucket >= b->bucket_count)
		return -EIO;
	pthread_mutex_lock(&b->fdlock);
	fd = b->fds[bucket];
	if (fd < 0) {
		snprintf(path, sizeof(path), "%s/bucket_%02x.data", b->root, (unsigned)bucket);
		fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 && (errno == EACCES || errno == EPERM))
			fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			fd = -errno;
		else
			b->fds[bucket] = fd;
	}
	pthread_mutex_unlock(&b->fdlock);
	return fd;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* ROOT's epoch table, read-only; without it every key is looked up and every read checked. */
static void batch_map_epochs(struct offloadfs_batch *b)
{
	char path[4200];
	struct stat st;
	void *t;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", b->root, OFS_BATCH_EPOCH_NAME);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	t = MAP_FAILED;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) &&
	    (size_t)st.st_size >= sizeof(struct ofs_batch_epochs))
		t = mmap(NULL, sizeof(struct ofs_batch_epochs), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (t == MAP_FAILED)
		return;
	b->kept = calloc(BATCH_KEEP_SLOTS, sizeof(*b->kept));
	if (!b->kept || ((const struct ofs_batch_epochs *)t)->magic != OFS_BATCH_EPOCH_MAGIC) {
		free(b->kept);
		b->kept = NULL;
		munmap(t, sizeof(struct ofs_batch_epochs));
		return;
	}
	b->ep = t;
}

int offloadfs_batch_valid(const struct offloadfs_batch *b, const struct offloadfs_desc *d)
{
	const struct ofs_batch_epochs *ep = b->ep;

	if (!ep || !d->gen || d->err)
		return 0;
	/* After the caller's reads of the pages, as a seqlock's second check is. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return __atomic_load_n(&ep->live, __ATOMIC_ACQUIRE) == 1 &&
	       __atomic_load_n(&ep->gen, __ATOMIC_ACQUIRE) == d->gen &&
	       __atomic_load_n(&ep->slot[d->ino % OFS_BATCH_EPOCH_SLOTS], __ATOMIC_ACQUIRE) ==
		       d->epoch;
}

/* key's entry in its set when kept, else the slot to keep it in (empty, or the oldest). */
static struct batch_kept *kept_slot(struct offloadfs_batch *b, const char *key, uint64_t *hash)
{
	struct batch_kept *set, *victim;
	unsigned w;

	*hash = XXH3_64bits(key, strlen(key));
	set = &b->kept[(*hash % (BATCH_KEEP_SLOTS / BATCH_KEEP_WAYS)) * BATCH_KEEP_WAYS];
	victim = set;
	for (w = 0; w < BATCH_KEEP_WAYS; w++) {
		if (set[w].key && set[w].hash == *hash && !strcmp(set[w].key, key))
			return &set[w];
		if (victim->key && (!set[w].key || set[w].taken < victim->taken))
			victim = &set[w];
	}
	return victim;
}

/* A descriptor of key kept and still valid: 1 and *d. */
static int kept_get(struct offloadfs_batch *b, const char *key, uint64_t now,
		    struct offloadfs_desc *d)
{
	struct batch_kept *k;
	uint64_t h;
	int32_t bucket = -1;
	int hit;

	if (!b->kept)
		return 0;
	pthread_mutex_lock(&b->keeplock);
	k = kept_slot(b, key, &h);
	/* Signed: another thread may have kept it after this call read the clock. */
	hit = k->key && k->hash == h && (int64_t)(now - k->taken) < (int64_t)BATCH_KEEP_NS &&
	      !strcmp(k->key, key);
	if (hit) {
		*d = k->d;
		bucket = k->bucket;
	}
	pthread_mutex_unlock(&b->keeplock);
	if (!hit)
		return 0;
	d->fd = bucket >= 0 ? bucket_fd(b, bucket) : -1;
	return (bucket < 0 || d->fd >= 0) && offloadfs_batch_valid(b, d);
}

static void kept_put(struct offloadfs_batch *b, const char *key, int32_t bucket,
		     const struct offloadfs_desc *d, uint64_t now)
{
	struct batch_kept *k;
	uint64_t h;
	char *copy;

	if (!b->kept || !d->gen || d->err)
		return;
	copy = strdup(key);
	if (!copy)
		return;
	pthread_mutex_lock(&b->keeplock);
	k = kept_slot(b, key, &h);
	free(k->key);
	k->key = copy;
	k->hash = h;
	k->taken = now;
	k->d = *d;
	k->bucket = bucket;
	pthread_mutex_unlock(&b->keeplock);
}

static void kept_drop(struct offloadfs_batch *b, const char *key)
{
	struct batch_kept *k;
	uint64_t h;

	if (!b->kept)
		return;
	pthread_mutex_lock(&b->keeplock);
	k = kept_slot(b, key, &h);
	if (k->key && k->hash == h && !strcmp(k->key, key)) {
		free(k->key);
		k->key = NULL;
	}
	pthread_mutex_unlock(&b->keeplock);
}

struct offloadfs_batch *offloadfs_batch_open(const char *tenant_dir)
{
	struct offloadfs_batch *b = calloc(1, sizeof(*b));
	struct ofs_batch_hdr *hdr;
	struct ofs_batch_info *in;
	char path[4200];
	const char *env;
	int ret, i;

	if (!b)
		return NULL;
	for (i = 0; i < (int)BATCH_BUCKETS; i++)
		b->fds[i] = -1;
	pthread_mutex_init(&b->lock, NULL);
	pthread_mutex_init(&b->fdlock, NULL);
	pthread_mutex_init(&b->keeplock, NULL);
	snprintf(path, sizeof(path), "%s/%s", tenant_dir, OFS_BATCH_NAME);
	b->dir = strdup(tenant_dir);
	b->req = malloc(OFS_BATCH_REQ_MAX);
	b->ctl = open(path, O_RDWR | O_CLOEXEC);
	if (!b->dir || !b->req || b->ctl < 0) {
		ret = b->ctl < 0 ? errno : ENOMEM;
		goto fail;
	}
	hdr = (void *)b->req;
	memset(hdr, 0, sizeof(*hdr));
	hdr->magic = OFS_BATCH_MAGIC;
	hdr->op = OFS_BATCH_INFO;
	hdr->len = sizeof(*hdr);
	ret = -batch_call(b, sizeof(*hdr), sizeof(*hdr) + sizeof(*in));
	if (ret)
		goto fail;
	in = (void *)(b->reply + sizeof(*hdr));
	b->page_size = in->page_size;
	b->bucket_count = in->bucket_count;
	if (in->rootlen >= sizeof(b->root) || b->bucket_count > BATCH_BUCKETS || !b->page_size) {
		ret = EIO;
		goto fail;
	}
	memcpy(b->root, in->root, in->rootlen);
	b->root[in->rootlen] = '\0';
	b->verify = (in->flags & OFS_BATCH_INFO_VERIFY) != 0;
	b->csum_ok = (in->flags & OFS_BATCH_INFO_CSUM) != 0;
	env = getenv("OFFLOADFS_VERIFY");
	b->commit_verify = env && *env && strcmp(env, "0") != 0;
	if (in->flags & OFS_BATCH_INFO_EPOCHS)
		batch_map_epochs(b);
	return b;
fail:
	offloadfs_batch_close(b);
	errno = ret;
	return NULL;
}

void offloadfs_batch_close(struct offloadfs_batch *b)
{
	int i;

	if (!b)
		return;
	if (b->ctl >= 0)
		close(b->ctl);
	for (i = 0; i < (int)BATCH_BUCKETS; i++)
		if (b->fds[i] >= 0)
			close(b->fds[i]);
	if (b->ep)
		munmap((void *)b->ep, sizeof(*b->ep));
	for (i = 0; b->kept && i < (int)BATCH_KEEP_SLOTS; i++)
		free(b->kept[i].key);
	free(b->kept);
	pthread_mutex_destroy(&b->lock);
	pthread_mutex_destroy(&b->fdlock);
	pthread_mutex_destroy(&b->keeplock);
	free(b->dir);
	free(b->req);
	free(b->reply);
	free(b);
}

uint64_t offloadfs_batch_page_size(const struct offloadfs_batch *b)
{
	return b->page_size;
}

static int batch_statuses(struct offloadfs_batch *b, int op, int flags, const char *const *keys,
			  const size_t *sizes, const uint64_t *const *pcs, size_t n, int *errs);

/* A request with a struct ofs_batch_desc reply per key, over every key in chunks. */
static int batch_descs(struct offloadfs_batch *b, int op, const char *const *keys,
		       const size_t *sizes, size_t n, struct offloadfs_desc *d)
{
	size_t i = 0, k, taken, len, nundo = 0;
	uint64_t now = now_ns();
	const char **undo = NULL;
	int ret = 0, st;

	pthread_mutex_lock(&b->lock);
	while (i < n) {
		const struct ofs_batch_desc *rd;

		len = batch_build(b, op, 0, keys + i, sizes ? sizes + i : NULL, NULL, n - i, &taken);
		if (!taken) {
			ret = -E2BIG;
			break;
		}
		st = batch_call(b, len, sizeof(struct ofs_batch_hdr) + taken * sizeof(*rd));
		rd = (const void *)(b->reply + sizeof(struct ofs_batch_hdr));
		for (k = 0; k < taken; k++) {
			struct offloadfs_desc *o = &d[i + k];

			memset(o, 0, sizeof(*o));
			o->fd = -1;
			o->err = st ? st : reply_has(b, k, sizeof(*rd)) ? rd[k].err : -EIO;
			if (!o->err) {
				o->offset = rd[k].offset;
				o->size = rd[k].size;
				o->csum = rd[k].csum;
				o->ino = rd[k].ino;
				o->gen = rd[k].gen;
				o->epoch = rd[k].epoch;
				if (rd[k].bucket >= 0) {
					o->fd = bucket_fd(b, rd[k].bucket);
					if (o->fd < 0)
						o->err = o->fd;
					/*
					 * Reserved, but this process cannot write it (no
					 * access to ROOT): given back below rather than at
					 * the description's close, which for the tenants
					 * the process keeps open is its exit.
					 */
					if (o->fd < 0 && op == OFS_BATCH_RESERVE) {
						if (!undo)
							undo = calloc(n, sizeof(*undo));
						if (undo)
							undo[nundo++] = keys[i + k];
					}
				}
				if (op == OFS_BATCH_LOOKUP)
					kept_put(b, keys[i + k], rd[k].bucket, o, now);
			}
			if (o->err && !ret)
				ret = o->err;
		}
		if (st)
			break;
		i += taken;
	}
	for (; i < n; i++) {
		/* Keys the loop never reached (a batch failed) fail with it. */
		memset(&d[i], 0, sizeof(d[i]));
		d[i].fd = -1;
		d[i].err = ret;
	}
	pthread_mutex_unlock(&b->lock);
	if (nundo)
		batch_statuses(b, OFS_BATCH_ABORT, 0, undo, NULL, NULL, nundo, NULL);
	free(undo);
	return ret;
}

int offloadfs_batch_reserve(struct offloadfs_batch *b, const char *const *keys,
			    const size_t *lens, size_t n, struct offloadfs_desc *d)
{
	return batch_descs(b, OFS_BATCH_RESERVE, keys, lens, n, d);
}

int offloadfs_batch_lookup(struct offloadfs_batch *b, const char *const *keys, size_t n,
			   struct offloadfs_desc *d)
{
	return batch_descs(b, OFS_BATCH_LOOKUP, keys, NULL, n, d);
}

/*
 * COMMIT, DELETE or ABORT: a status per key (a commit's replies are the
 * new files' descriptors, kept for gets; each reply entry starts with err).
 */
static int batch_statuses(struct offloadfs_batch *b, int op, int flags, const char *const *keys,
			  const size_t *sizes, const uint64_t *const *pcs, size_t n, int *errs)
{
	size_t i = 0, k, taken, len, entsize = op == OFS_BATCH_COMMIT ?
		sizeof(struct ofs_batch_desc) : sizeof(struct ofs_batch_status);
	uint64_t now = now_ns();
	int ret = 0, st;

	pthread_mutex_lock(&b->lock);
	while (i < n) {
		const char *rs;

		len = batch_build(b, op, flags, keys + i, sizes ? sizes + i : NULL,
				  pcs ? pcs + i : NULL, n - i, &taken);
		if (!taken) {
			ret = -E2BIG;
			break;
		}
		st = batch_call(b, len, sizeof(struct ofs_batch_hdr) + taken * entsize);
		rs = b->reply + sizeof(struct ofs_batch_hdr);
		for (k = 0; k < taken; k++) {
			/*
			 * A failed commit names the entries that failed; the
			 * others were not committed either (ECANCELED).
			 */
			int e = !reply_has(b, k, entsize) ? (st ? 0 : -EIO) :
				((const struct ofs_batch_status *)(const void *)(rs + k * entsize))->err;

			if (!st && !e && op == OFS_BATCH_COMMIT) {
				const struct ofs_batch_desc *rd = (const void *)(rs + k * entsize);
				struct offloadfs_desc o = {
					.offset = rd->offset, .size = rd->size, .csum = rd->csum,
					.ino = rd->ino, .gen = rd->gen, .epoch = rd->epoch,
				};

				kept_put(b, keys[i + k], rd->bucket, &o, now);
			}

			/* A commit refused whole (a bad sum, a directory gone): the others were fine. */
			if (st && !e)
				e = op == OFS_BATCH_COMMIT && (st == -EBADMSG || st == -ENOENT) ? -ECANCELED
											   : st;
			if (errs)
				errs[i + k] = e;
			if (e && !ret)
				ret = st ? st : e;
		}
		i += taken;
	}
	for (; errs && i < n; i++)
		errs[i] = ret;
	pthread_mutex_unlock(&b->lock);
	return ret;
}

int offloadfs_batch_commit(struct offloadfs_batch *b, const char *const *keys,
			   const size_t *lens, const uint64_t *const *pcs, size_t n, int flags,
			   int *errs)
{
	int f = (flags & OFFLOADFS_SYNC ? OFS_BATCH_SYNC : 0) |
		(flags & OFFLOADFS_CSUM && b->csum_ok ? OFS_BATCH_CSUM : 0) |
		(flags & OFFLOADFS_VERIFY || b->commit_verify ? OFS_BATCH_VERIFY : 0);

	return batch_statuses(b, OFS_BATCH_COMMIT, f, keys, lens, pcs, n, errs);
}

/* ---- the per-process cache of tenants ---- */

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct offloadfs_batch *cache;

static struct offloadfs_batch *batch_get(const char *tenant_dir, int *err)
{
	struct offloadfs_batch *b;

	pthread_mutex_lock(&cache_lock);
	for (b = cache; b; b = b->next)
		if (!strcmp(b->dir, tenant_dir))
			break;
	if (!b) {
		b = offloadfs_batch_open(tenant_dir);
		if (b) {
			b->next = cache;
			cache = b;
		} else {
			*err = -errno;
		}
	}
	pthread_mutex_unlock(&cache_lock);
	return b;
}

/* A call that failed before any batch: every key fails with it. */
static int fail_all(int *errs, size_t n, int err)
{
	size_t i;

	for (i = 0; errs && i < n; i++)
		errs[i] = err;
	return err;
}

/*
 * 1 when key can name a file below a tenant: at most 4,095 bytes of
 * components of 1 to 255 bytes, none "." or "..".  The daemon answers
 * the others (EINVAL, ENAMETOOLONG).
 */
static int key_ok(const char *key)
{
	size_t len = 0, klen = strlen(key);
	const char *p;

	if (klen > 4095)
		return 0;
	for (p = key;; p++) {
		if (*p && *p != '/') {
			len++;
			continue;
		}
		if (len == 0 || len > 255 || (len == 1 && p[-1] == '.') ||
		    (len == 2 && p[-1] == '.' && p[-2] == '.'))
			return 0;
		if (!*p)
			return 1;
		len = 0;
	}
}

/*
 * Make the directories of key below dir (mkdir -p), as the mount allows;
 * none for a key the daemon will refuse, so that a refused key leaves
 * nothing behind (a ".." would even reach another tenant).  One that
 * cannot be made (a file in the way: ENOTDIR) is the key's error, and
 * the directories made for it before are removed again.
 */
static int make_dirs(const char *dir, const char *key, char *last, size_t lastcap)
{
	const char *slash = strrchr(key, '/');
	char path[8192];
	size_t dlen, plen, i, made = 0;
	int ret = 0;

	if (!slash || !key_ok(key))
		return 0;
	plen = (size_t)(slash - key);
	if (plen < lastcap && !strncmp(last, key, plen) && last[plen] == '\0')
		return 0;
	dlen = (size_t)snprintf(path, sizeof(path), "%s/", dir);
	if (dlen + plen >= sizeof(path))
		return -ENAMETOOLONG;
	for (i = 0; i <= plen; i++) {
		if (i == plen || key[i] == '/') {
			path[dlen + i] = '\0';
			if (mkdir(path, 0777) == 0) {
				made++;
			} else if (errno != EEXIST) {
				ret = -errno;
				break;
			}
		}
		path[dlen + i] = key[i];
	}
	if (ret) {
		/* Deepest first: path holds the key's directories up to the one that failed. */
		while (made && i-- > 0) {
			if (key[i] != '/')
				continue;
			path[dlen + i] = '\0';
			if (rmdir(path))
				break;
			made--;
		}
		return ret;
	}
	if (plen < lastcap) {
		memcpy(last, key, plen);
		last[plen] = '\0';
	}
	return 0;
}

static int put_key_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * 0 when no key appears twice, else -EINVAL (-ENOMEM when it cannot
 * tell).  The daemon refuses such a request too, but only within one
 * request (up to 1,024 keys) and only after put_many made the keys'
 * directories: checked here, before anything is made, over every key of
 * the call.
 */
static int put_dup_check(const char *const *keys, size_t n)
{
	const char **sorted;
	size_t i;
	int ret = 0;

	if (n < 2)
		return 0;
	sorted = malloc(n * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, keys, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), put_key_cmp);
	for (i = 1; i < n && !ret; i++)
		if (!strcmp(sorted[i - 1], sorted[i]))
			ret = -EINVAL;
	free(sorted);
	return ret;
}

int offloadfs_put_many(const char *tenant_dir, const char *const *keys, const void *const *bufs,
		       const size_t *lens, size_t n, int flags, int *errs)
{
	struct offloadfs_batch *b;
	struct offloadfs_desc *d = NULL;
	const char **ckeys = NULL, **rkeys = NULL;
	size_t *clens = NULL, *idx = NULL, *rlens = NULL, *ridx = NULL, i, r, nr = 0, nc = 0,
	       npcs = 0;
	uint64_t **cpcs = NULL, *pcbuf = NULL;
	int ret = 0, *cerr = NULL, *kerr = NULL;
	char last[4096] = "";

	b = batch_get(tenant_dir, &ret);
	if (!b)
		return fail_all(errs, n, ret);
	ret = put_dup_check(keys, n);
	if (ret)
		return fail_all(errs, n, ret);
	d = calloc(n + 1, sizeof(*d));
	ckeys = calloc(n + 1, sizeof(*ckeys));
	clens = calloc(n + 1, sizeof(*clens));
	cpcs = calloc(n + 1, sizeof(*cpcs));
	idx = calloc(n + 1, sizeof(*idx));
	cerr = calloc(n + 1, sizeof(*cerr));
	kerr = calloc(n + 1, sizeof(*kerr));
	rkeys = calloc(n + 1, sizeof(*rkeys));
	rlens = calloc(n + 1, sizeof(*rlens));
	ridx = calloc(n + 1, sizeof(*ridx));
	for (i = 0; i < n; i++)
		npcs += (lens[i] + b->page_size - 1) / b->page_size + 1;
	pcbuf = calloc(npcs + 1, sizeof(*pcbuf));
	if (!d || !ckeys || !clens || !cpcs || !idx || !cerr || !kerr || !rkeys || !rlens ||
	    !ridx || !pcbuf) {
		ret = fail_all(errs, n, -ENOMEM);
		goto out;
	}
	/* The keys whose directories are there go on to the reserve. */
	for (i = 0; i < n; i++) {
		kerr[i] = make_dirs(tenant_dir, keys[i], last, sizeof(last));
		if (kerr[i])
			continue;
		rkeys[nr] = keys[i];
		rlens[nr] = lens[i];
		ridx[nr++] = i;
	}
	ret = nr ? offloadfs_batch_reserve(b, rkeys, rlens, nr, d) : 0;
	npcs = 0;
	for (r = 0; r < nr; r++) {
		uint64_t np = (rlens[r] + b->page_size - 1) / b->page_size, p;
		ssize_t w = 0;

		i = ridx[r];
		kerr[i] = d[r].err;
		if (d[r].err)
			continue;
		if (lens[i])
			w = full_pwrite(d[r].fd, bufs[i], lens[i], (off_t)d[r].offset);
		if (w < 0) {
			/* Not committed; the reservation goes back with the others below. */
			kerr[i] = (int)w;
			if (!ret)
				ret = (int)w;
			batch_statuses(b, OFS_BATCH_ABORT, 0, &keys[i], NULL, NULL, 1, NULL);
			continue;
		}
		cpcs[nc] = pcbuf + npcs;
		for (p = 0; p < np; p++) {
			uint64_t off = p * b->page_size;
			size_t len = lens[i] - off < b->page_size ? lens[i] - off : b->page_size;

			pcbuf[npcs++] = XXH3_64bits((const char *)bufs[i] + off, len);
		}
		/* The whole content's too: the commit records the sums without reading the pages. */
		pcbuf[npcs++] = XXH3_64bits(bufs[i], lens[i]);
		ckeys[nc] = keys[i];
		clens[nc] = lens[i];
		idx[nc++] = i;
	}
	if (nc) {
		int c = offloadfs_batch_commit(b, ckeys, clens, (const uint64_t *const *)cpcs, nc,
					       flags | OFFLOADFS_CSUM, cerr);

		if (c) {
			/* Whatever was not committed is given back now rather than at close. */
			batch_statuses(b, OFS_BATCH_ABORT, 0, ckeys, NULL, NULL, nc, NULL);
		}
		for (i = 0; i < nc; i++)
			if (!kerr[idx[i]])
				kerr[idx[i]] = cerr[i];
		if (c && !ret)
			ret = c;
	}
	for (i = 0; i < n; i++) {
		if (errs)
			errs[i] = kerr[i];
		if (kerr[i] && !ret)
			ret = kerr[i];
	}
out:
	free(d);
	free(ckeys);
	free(clens);
	free(cpcs);
	free(idx);
	free(cerr);
	free(kerr);
	free(rkeys);
	free(rlens);
	free(ridx);
	free(pcbuf);
	return ret;
}

/* Read one object with its descriptor into buf: 0 or a negative errno. */
static int get_read(const struct offloadfs_desc *d, void *buf, size_t cap)
{
	ssize_t r;

	if (d->err)
		return d->err;
	if (d->size > cap)
		return -EOVERFLOW;
	if (!d->size)
		return 0;
	r = full_pread(d->fd, buf, d->size, (off_t)d->offset);
	if (r < 0)
		return (int)r;
	return (uint64_t)r == d->size ? 0 : -EIO;
}

/*
 * A file of several extents has no one-run descriptor (the lookup's
 * EFBIG): read through the mount, as any reader, into buf.
 */
static int get_by_path(const char *tenant_dir, const char *key, void *buf, size_t cap,
		       uint64_t *size)
{
	char path[8192];
	struct stat st;
	ssize_t r;
	int fd, ret = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", tenant_dir, key) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		ret = -errno;
	} else {
		*size = (uint64_t)st.st_size;
		if (*size > cap) {
			ret = -EOVERFLOW;
		} else {
			r = full_pread(fd, buf, *size, 0);
			ret = r < 0 ? (int)r : (uint64_t)r == *size ? 0 : -EIO;
		}
	}
	close(fd);
	return ret;
}

/*
 * Descriptors for keys[idx[0..ni)] into d: kept ones when kept is set,
 * the others looked up in one request.
 */
static void get_descs(struct offloadfs_batch *b, const char *const *keys, const size_t *idx,
		      size_t ni, int kept, struct offloadfs_desc *d, const char **mkeys,
		      size_t *miss, struct offloadfs_desc *md)
{
	uint64_t now = now_ns();
	size_t j, nm = 0;

	for (j = 0; j < ni; j++) {
		size_t i = idx[j];

		if (kept && kept_get(b, keys[i], now, &d[i]))
			continue;
		miss[nm] = i;
		mkeys[nm++] = keys[i];
	}
	if (!nm)
		return;
	offloadfs_batch_lookup(b, mkeys, nm, md);
	for (j = 0; j < nm; j++)
		d[miss[j]] = md[j];
}

int offloadfs_get_many(const char *tenant_dir, const char *const *keys, void *const *bufs,
		       const size_t *caps, size_t n, size_t *lens, int *errs)
{
	struct offloadfs_batch *b;
	struct offloadfs_desc *d, *md;
	const char **mkeys;
	size_t i, j, ni, nstale, *idx, *miss;
	int ret = 0, round, *e;

	b = batch_get(tenant_dir, &ret);
	if (!b)
		return fail_all(errs, n, ret);
	d = calloc(n + 1, sizeof(*d));
	md = calloc(n + 1, sizeof(*md));
	mkeys = calloc(n + 1, sizeof(*mkeys));
	idx = calloc(n + 1, sizeof(*idx));
	miss = calloc(n + 1, sizeof(*miss));
	e = calloc(n + 1, sizeof(*e));
	if (!d || !md || !mkeys || !idx || !miss || !e) {
		ret = fail_all(errs, n, -ENOMEM);
		goto out;
	}
	for (i = 0; i < n; i++)
		idx[i] = i;
	/*
	 * A read is good when the key's descriptor was still valid after it
	 * (docs/batch.md, "Descriptors a client keeps"): the pages were not
	 * handed to another file meanwhile.  A key whose descriptor went
	 * stale is looked up and read again, twice at most; then (and
	 * without an epoch table) the checksum decides, as it does for every
	 * read when the store verifies.
	 */
	for (round = 0, ni = n; ni; round++) {
		get_descs(b, keys, idx, ni, round == 0, d, mkeys, miss, md);
		/* Each key checked right after its read, while its bytes are in the CPU's cache. */
		for (j = 0, nstale = 0; j < ni; j++) {
			int valid;

			i = idx[j];
			e[i] = get_read(&d[i], bufs[i], caps[i]);
			if (d[i].err)
				continue;
			valid = offloadfs_batch_valid(b, &d[i]);
			if (!valid && b->ep && d[i].gen && round < 2) {
				kept_drop(b, keys[i]);
				idx[nstale++] = i;
				continue;
			}
			if (!e[i] && (b->verify || !valid) &&
			    !csum_matches(bufs[i], d[i].size, offloadfs_batch_page_size(b),
					  d[i].csum))
				e[i] = -EIO;
		}
		ni = nstale;
	}
	for (i = 0; i < n; i++)
		if (e[i] == -EFBIG)
			e[i] = get_by_path(tenant_dir, keys[i], bufs[i], caps[i], &d[i].size);
	for (i = 0; i < n; i++) {
		/* EOVERFLOW: the size a buffer needs. */
		if (lens)
			lens[i] = !e[i] || e[i] == -EOVERFLOW ? d[i].size : 0;
		if (errs)
			errs[i] = e[i];
		if (e[i] && !ret)
			ret = e[i];
	}
out:
	free(d);
	free(md);
	free(mkeys);
	free(idx);
	free(miss);
	free(e);
	return ret;
}

int offloadfs_exists_many(const char *tenant_dir, const char *const *keys, size_t n,
			  int *exists)
{
	struct offloadfs_batch *b;
	struct offloadfs_desc *d, *md;
	const char **mkeys;
	size_t i, *idx, *miss;
	int ret = 0;

	b = batch_get(tenant_dir, &ret);
	if (!b)
		return ret;
	d = calloc(n + 1, sizeof(*d));
	md = calloc(n + 1, sizeof(*md));
	mkeys = calloc(n + 1, sizeof(*mkeys));
	idx = calloc(n + 1, sizeof(*idx));
	miss = calloc(n + 1, sizeof(*miss));
	if (!d || !md || !mkeys || !idx || !miss) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++)
		idx[i] = i;
	/* A kept, valid descriptor answers without the daemon. */
	get_descs(b, keys, idx, n, 1, d, mkeys, miss, md);
	for (i = 0; i < n; i++) {
		/* EFBIG: a file of several extents, which has no one-run descriptor. */
		exists[i] = d[i].err == 0 || d[i].err == -EFBIG;
		if (d[i].err && d[i].err != -ENOENT && d[i].err != -EFBIG && !ret)
			ret = d[i].err;
	}
out:
	free(d);
	free(md);
	free(mkeys);
	free(idx);
	free(miss);
	return ret;
}

int offloadfs_delete_many(const char *tenant_dir, const char *const *keys, size_t n, int *errs)
{
	struct offloadfs_batch *b;
	int ret = 0;

	b = batch_get(tenant_dir, &ret);
	if (!b)
		return fail_all(errs, n, ret);
	return batch_statuses(b, OFS_BATCH_DELETE, 0, keys, NULL, NULL, n, errs);
}
