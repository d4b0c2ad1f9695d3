/*
 * batch.c: the batch control file, TENANT/.offload-batch (docs/batch.md).
 *
 * A client writes one request (reserve, commit, lookup, delete or abort of
 * up to OFS_BATCH_KEYS_MAX keys) and reads its reply: two FUSE round trips
 * per batch.  Reserved runs are working states of the open description
 * (struct batch_handle), never in any record: a release (the client closed
 * or died) frees them, and after a daemon crash the rebuild of the bitmaps
 * from the records does.  A commit reads the pages back and checks them
 * against the client's page checksums, then makes every entry visible in
 * one metadata transaction.
 *
 * The file is not in the database: its inode number is the tenant's with
 * OFS_BATCH_INO set, and the ops here wrap the table of ll.c for it.
 * Lock order: a handle's lock, then store.lock.
 */
#include "ofs.h"
#include "epoch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "offloadfs_batch_proto.h"

#define OFS_BATCH_INO (1ULL << 62) /* AUTOINCREMENT inode numbers never get there */

struct batch_resv {
	char *key;            /* below the tenant */
	uint32_t klen;
	uint64_t size;
	struct kvb_obj *obj;  /* the working state holding the reserved run */
	int done;             /* committed or refused by the current commit */
};

struct batch_handle {
	pthread_mutex_t lock; /* one request at a time per open description */
	struct batch_handle *next, *prev; /* batch_all; batch_all_lock */
	uint64_t tenant;
	char tname[META_NAME_MAX + 1];
	struct batch_resv *resv;
	size_t nresv, cap;
	char *reply;
	size_t rlen;
};

/* Every open handle, so that an unmount with some still open frees their runs. */
static pthread_mutex_t batch_all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct batch_handle batch_all = { .next = &batch_all, .prev = &batch_all };

static int batch_ino(fuse_ino_t ino)
{
	return (ino & OFS_BATCH_INO) != 0;
}

/*
 * Names the kernel may hold an entry for, so that a commit invalidates
 * only those (fs/fuse/dir.c caches the negative entry of a LOOKUP answered
 * with node id 0 for its entry_timeout, which ofs_op_lookup sets; a name
 * the kernel never asked about has no entry to be stale).  Every LOOKUP
 * sets a bit for (parent, name) before it is served and again after its
 * reply; a commit tests the bits of its names after its transaction.  The
 * first set is ordered with the commit by store.lock: a LOOKUP that took
 * the lock before the commit set its bit before, one that took it after
 * found the file.  Two maps, each covering a period a little longer than
 * the kernel's entry timeout: a bit lives at least one period after it was
 * last set, longer than an entry the LOOKUP gave can live untested.  A
 * collision costs one needless invalidation.  Positive entries of names
 * gone since are dropped by whoever removed them (unlink, rename, a batch
 * delete, eviction's queued invalidations).
 */
#define BATCH_SEEN_BITS (1u << 20)
#define BATCH_SEEN_MARGIN 10 /* seconds: a reply's delivery, a waking looker */

static struct {
	pthread_mutex_t lock;  /* a map's reset */
	uint64_t period[2];    /* which period map i covers; atomic */
	uint64_t bits[2][BATCH_SEEN_BITS / 64]; /* atomic words */
} batch_seen = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t batch_seen_period(const struct ofs *ofs)
{
	struct timespec ts;
	double t = ofs->timeout < 1e9 ? ofs->timeout : 1e9;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	/* +1: 0 is no period, so a map never reset covers none. */
	return (uint64_t)ts.tv_sec / ((uint64_t)t + 1 + BATCH_SEEN_MARGIN) + 1;
}

static uint64_t batch_seen_hash(uint64_t parent, const char *name, size_t len)
{
	return XXH3_64bits_withSeed(name, len, parent) % BATCH_SEEN_BITS;
}

/* h: batch_seen_hash of the name, computed once per LOOKUP for both sets. */
static void batch_seen_set(const struct ofs *ofs, uint64_t h)
{
	uint64_t per = batch_seen_period(ofs);
	unsigned int m = (unsigned int)(per & 1);
	size_t w;

	if (__atomic_load_n(&batch_seen.period[m], __ATOMIC_ACQUIRE) != per) {
		pthread_mutex_lock(&batch_seen.lock);
		if (batch_seen.period[m] != per) {
			/* Two periods old: every entry it stood for has expired. */
			for (w = 0; w < BATCH_SEEN_BITS / 64; w++)
				__atomic_store_n(&batch_seen.bits[m][w], 0, __ATOMIC_RELAXED);
			__atomic_store_n(&batch_seen.period[m], per, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&batch_seen.lock);
	}
	__atomic_fetch_or(&batch_seen.bits[m][h / 64], 1ull << (h % 64), __ATOMIC_SEQ_CST);
}

/*
 * 1 when the kernel may hold an entry for the name.  After the commit's
 * transaction; per: batch_seen_period() taken after it too.
 */
static int batch_seen_test(uint64_t per, uint64_t parent, const char *name, size_t len)
{
	uint64_t h = batch_seen_hash(parent, name, len);
	unsigned int m;

	for (m = 0; m < 2; m++) {
		uint64_t p = __atomic_load_n(&batch_seen.period[m], __ATOMIC_ACQUIRE);

		if (p + 1 >= per &&
		    (__atomic_load_n(&batch_seen.bits[m][h / 64], __ATOMIC_SEQ_CST) >> (h % 64)) & 1)
			return 1;
	}
	return 0;
}

/* A tenant directory's record (parent is the root).  Under store.lock. */
static int batch_tenant(struct ofs *ofs, uint64_t ino, struct meta_inode *m)
{
	int ret = meta_get(ofs->store.meta, ino, m);

	if (!ret && (m->parent != 1 || !S_ISDIR(m->mode)))
		ret = -ENOENT;
	return ret;
}

static void batch_stat(const struct meta_inode *t, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = t->ino | OFS_BATCH_INO;
	st->st_mode = S_IFREG | 0600; /* the tenant's owner (and root) only */
	st->st_nlink = 1;
	st->st_uid = t->uid;
	st->st_gid = t->gid;
	st->st_blksize = 4096;
}

static void batch_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ofs *ofs = ofs_of(req);
	struct fuse_entry_param e;
	struct meta_inode t;
	int ret;

	if (strcmp(name, OFS_BATCH_NAME) != 0) {
		uint64_t h = batch_seen_hash(parent, name, strlen(name));

		batch_seen_set(ofs, h);
		ofs_ll_ops.lookup(req, parent, name);
		batch_seen_set(ofs, h);
		return;
	}
	pthread_mutex_lock(&ofs->store.lock);
	ret = batch_tenant(ofs, parent, &t);
	pthread_mutex_unlock(&ofs->store.lock);
	if (ret) {
		ofs_ll_ops.lookup(req, parent, name);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = t.ino | OFS_BATCH_INO;
	batch_stat(&t, &e.attr);
	e.attr_timeout = ofs->timeout;
	e.entry_timeout = ofs->timeout;
	fuse_reply_entry(req, &e);
}

static void batch_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	if (batch_ino(ino))
		fuse_reply_none(req);
	else
		ofs_ll_ops.forget(req, ino, nlookup);
}

static void batch_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	size_t i, n = 0;

	/* The control files' entries left out (they hold nothing), in place. */
	for (i = 0; i < count; i++)
		if (!batch_ino(forgets[i].ino))
			forgets[n++] = forgets[i];
	ofs_ll_ops.forget_multi(req, n, forgets);
}

static void batch_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct meta_inode t;
	struct stat st;
	int ret;

	if (!batch_ino(ino)) {
		ofs_ll_ops.getattr(req, ino, fi);
		return;
	}
	pthread_mutex_lock(&ofs->store.lock);
	ret = batch_tenant(ofs, ino & ~OFS_BATCH_INO, &t);
	pthread_mutex_unlock(&ofs->store.lock);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	batch_stat(&t, &st);
	fuse_reply_attr(req, &st, ofs->timeout);
}

static void batch_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			     struct fuse_file_info *fi)
{
	if (batch_ino(ino))
		fuse_reply_err(req, EPERM);
	else
		ofs_ll_ops.setattr(req, ino, attr, to_set, fi);
}

static void batch_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct batch_handle *h;
	struct meta_inode t;
	size_t len = sizeof(h->tname) - 1;
	uint64_t parent;
	int ret;

	if (!batch_ino(ino)) {
		ofs_ll_ops.open(req, ino, fi);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDWR) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&ofs->store.lock);
	ret = batch_tenant(ofs, ino & ~OFS_BATCH_INO, &t);
	if (!ret)
		ret = meta_name(ofs->store.meta, t.ino, &parent, h->tname, &len);
	pthread_mutex_unlock(&ofs->store.lock);
	if (ret) {
		free(h);
		fuse_reply_err(req, -ret);
		return;
	}
	h->tname[len] = '\0';
	h->tenant = t.ino;
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_lock(&batch_all_lock);
	h->next = batch_all.next;
	h->prev = &batch_all;
	batch_all.next->prev = h;
	batch_all.next = h;
	pthread_mutex_unlock(&batch_all_lock);
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = 1; /* every write is a request, every read a reply */
	if (fuse_reply_open(req, fi) == -ENOENT) {
		/* The opener was interrupted: no release will come for it. */
		pthread_mutex_lock(&batch_all_lock);
		h->prev->next = h->next;
		h->next->prev = h->prev;
		pthread_mutex_unlock(&batch_all_lock);
		pthread_mutex_destroy(&h->lock);
		free(h);
	}
}

static void batch_resv_drop(struct ofs *ofs, struct batch_handle *h, size_t i)
{
	kvb_obj_close(&ofs->store.kvb, h->resv[i].obj);
	free(h->resv[i].key);
	h->resv[i] = h->resv[--h->nresv];
}

static void batch_handle_free(struct ofs *ofs, struct batch_handle *h)
{
	pthread_mutex_lock(&h->lock);
	while (h->nresv)
		batch_resv_drop(ofs, h, h->nresv - 1);
	pthread_mutex_unlock(&h->lock);
	free(h->resv);
	free(h->reply);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static void batch_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct batch_handle *h = (struct batch_handle *)(uintptr_t)fi->fh;

	if (!batch_ino(ino)) {
		ofs_ll_ops.release(req, ino, fi);
		return;
	}
	if (!h) {
		fuse_reply_err(req, 0);
		return;
	}
	pthread_mutex_lock(&batch_all_lock);
	h->prev->next = h->next;
	h->next->prev = h->prev;
	pthread_mutex_unlock(&batch_all_lock);
	batch_handle_free(ofs, h);
	fuse_reply_err(req, 0);
}

static void batch_op_destroy(void *userdata)
{
	struct ofs *ofs = userdata;
	struct batch_handle *h;

	/*
	 * Runs still reserved at unmount go back before the snapshot is
	 * saved.  The handles themselves stay: a RELEASE the kernel sent in
	 * the background may be served by another thread meanwhile, and it
	 * alone unlinks and frees its handle.
	 */
	pthread_mutex_lock(&batch_all_lock);
	for (h = batch_all.next; h != &batch_all; h = h->next) {
		pthread_mutex_lock(&h->lock);
		while (h->nresv)
			batch_resv_drop(ofs, h, h->nresv - 1);
		pthread_mutex_unlock(&h->lock);
	}
	pthread_mutex_unlock(&batch_all_lock);
	ofs_ll_ops.destroy(userdata);
}

static void batch_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (batch_ino(ino))
		fuse_reply_err(req, 0);
	else
		ofs_ll_ops.flush(req, ino, fi);
}

static void batch_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			  struct fuse_file_info *fi)
{
	struct batch_handle *h = (struct batch_handle *)(uintptr_t)fi->fh;

	if (!batch_ino(ino)) {
		ofs_ll_ops.read(req, ino, size, off, fi);
		return;
	}
	if (!h) {
		/* No OPEN reached us (a kernel in no-open mode): no description to answer from. */
		fuse_reply_err(req, EBADF);
		return;
	}
	pthread_mutex_lock(&h->lock);
	if (off < 0 || (size_t)off >= h->rlen)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, h->reply + off,
			       size < h->rlen - (size_t)off ? size : h->rlen - (size_t)off);
	pthread_mutex_unlock(&h->lock);
}

/* ---- requests ---- */

struct batch_req {
	const struct ofs_batch_hdr *hdr;
	const struct ofs_batch_ent **ent;
	const char **key;
	const uint64_t **pcs;
};

/* Split the request into entries; -EINVAL when it is malformed. */
static int batch_parse(const char *buf, size_t size, struct batch_req *r)
{
	const struct ofs_batch_hdr *hdr = (const void *)buf;
	size_t pos = sizeof(*hdr);
	uint32_t i;

	if (size < sizeof(*hdr) || hdr->magic != OFS_BATCH_MAGIC || hdr->len != size ||
	    hdr->n > OFS_BATCH_KEYS_MAX)
		return -EINVAL;
	r->hdr = hdr;
	r->ent = calloc(hdr->n + 1, sizeof(*r->ent));
	r->key = calloc(hdr->n + 1, sizeof(*r->key));
	r->pcs = calloc(hdr->n + 1, sizeof(*r->pcs));
	if (!r->ent || !r->key || !r->pcs)
		return -ENOMEM;
	for (i = 0; i < hdr->n; i++) {
		const struct ofs_batch_ent *e = (const void *)(buf + pos);

		if (size - pos < sizeof(*e))
			return -EINVAL;
		pos += sizeof(*e);
		/* A key too long or empty is that key's error (batch_resolve), not the batch's. */
		if (e->klen > OFS_BATCH_REQ_MAX || size - pos < ofs_batch_pad8(e->klen))
			return -EINVAL;
		r->ent[i] = e;
		r->key[i] = buf + pos;
		pos += ofs_batch_pad8(e->klen);
		if (e->npcs > (size - pos) / 8)
			return -EINVAL;
		r->pcs[i] = (const void *)(buf + pos);
		pos += (size_t)e->npcs * 8;
	}
	return pos == size ? 0 : -EINVAL;
}

static int batch_key_cmp(const void *a, const void *b, void *arg)
{
	const struct batch_req *r = arg;
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
	uint32_t li = r->ent[i]->klen, lj = r->ent[j]->klen;
	int c = memcmp(r->key[i], r->key[j], li < lj ? li : lj);

	return c ? c : (li > lj) - (li < lj);
}

/* 1 when a key appears twice. */
static int batch_has_dup(const struct batch_req *r)
{
	uint32_t n = r->hdr->n, i, *idx = malloc((n + 1) * sizeof(*idx));
	int dup = 0;

	if (!idx)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		idx[i] = i;
	/* qsort_r: requests of other descriptions are checked at the same time. */
	qsort_r(idx, n, sizeof(*idx), batch_key_cmp, (void *)r);
	for (i = 1; i < n && !dup; i++)
		dup = batch_key_cmp(&idx[i - 1], &idx[i], (void *)r) == 0;
	free(idx);
	return dup;
}

/*
 * The directory of the last key resolved: keys of a batch usually share
 * theirs, which is then walked once per batch rather than a lookup per
 * component per key.  Valid for one hold of store.lock (directories do not
 * change under it): zero it when taking the lock.
 */
struct batch_dircache {
	const char *key; /* the key whose first len bytes name directory ino */
	uint32_t len;
	uint64_t ino;
};

/*
 * The whole key before any of it is walked, so that a missing directory
 * does not hide what is wrong further on.  As through the mount: a key
 * past 4,095 bytes or a name past 255 is ENAMETOOLONG; an empty name, "."
 * or "..", or a NUL: EINVAL.
 */
static int batch_key_check(const char *key, uint32_t klen)
{
	uint32_t pos = 0;

	if (klen > META_KEY_MAX)
		return -ENAMETOOLONG;
	for (;;) {
		const char *slash = memchr(key + pos, '/', klen - pos);
		uint32_t len = slash ? (uint32_t)(slash - (key + pos)) : klen - pos;

		if (len > META_NAME_MAX)
			return -ENAMETOOLONG;
		if (len == 0 || memchr(key + pos, '\0', len) || (len == 1 && key[pos] == '.') ||
		    (len == 2 && key[pos] == '.' && key[pos + 1] == '.'))
			return -EINVAL;
		if (!slash)
			return 0;
		pos += len + 1;
	}
}

/*
 * Walk key's directories below the tenant: *dir the last one, *name its
 * last component (NUL-terminated, in namebuf), *m the entry when it exists
 * (0; the fields meta_lookup_brief fills) or -ENOENT.  Other errors: the key cannot name a file.  With m
 * NULL, the name is not looked up: 0 when its directory is there.  Under
 * store.lock; dc may be NULL.
 */
static int batch_resolve(struct ofs *ofs, uint64_t tenant, const char *key, uint32_t klen,
			 uint64_t *dir, char *namebuf, struct meta_inode *m,
			 struct batch_dircache *dc)
{
	const char *last = klen ? memrchr(key, '/', klen) : NULL;
	uint32_t dlen = last ? (uint32_t)(last - key) : 0, pos = 0;
	uint64_t cur = tenant;
	struct meta_inode d;
	int ret;

	/* Its directory checked and found for an earlier key: only the name is left. */
	if (last && dc && dc->key && dc->len == dlen && !memcmp(dc->key, key, dlen)) {
		cur = dc->ino;
		pos = dlen + 1;
	}
	ret = batch_key_check(key, klen);
	if (ret)
		return ret;
	for (;;) {
		const char *slash = memchr(key + pos, '/', klen - pos);
		uint32_t len = slash ? (uint32_t)(slash - (key + pos)) : klen - pos;

		if (!slash) {
			memcpy(namebuf, key + pos, len);
			namebuf[len] = '\0';
			*dir = cur;
			if (dc && last) {
				dc->key = key;
				dc->len = dlen;
				dc->ino = cur;
			}
			if (cur == tenant && strcmp(namebuf, OFS_BATCH_NAME) == 0)
				return -EINVAL;
			return m ? meta_lookup_brief(ofs->store.meta, cur, key + pos, len, m) : 0;
		}
		ret = meta_lookup_brief(ofs->store.meta, cur, key + pos, len, &d);
		if (ret)
			return ret;
		if (!S_ISDIR(d.mode))
			return -ENOTDIR;
		cur = d.ino;
		pos += len + 1;
	}
}

static ssize_t batch_find_resv(struct batch_handle *h, const char *key, uint32_t klen,
			       size_t hint)
{
	size_t i, k;

	/* Commits usually come in the order of their reserve: start where the last one matched. */
	for (k = 0; k < h->nresv; k++) {
		i = (hint + k) % h->nresv;
		if (h->resv[i].klen == klen && !memcmp(h->resv[i].key, key, klen))
			return (ssize_t)i;
	}
	return -1;
}

static void *batch_reply_alloc(struct batch_handle *h, const struct batch_req *r, size_t entsize)
{
	size_t len = sizeof(struct ofs_batch_hdr) + (size_t)r->hdr->n * entsize;
	struct ofs_batch_hdr *hdr;

	free(h->reply);
	h->rlen = 0;
	h->reply = calloc(1, len);
	if (!h->reply)
		return NULL;
	hdr = (void *)h->reply;
	hdr->magic = OFS_BATCH_MAGIC;
	hdr->op = r->hdr->op;
	hdr->n = r->hdr->n;
	hdr->len = (uint32_t)len;
	h->rlen = len;
	return h->reply + sizeof(*hdr);
}

static void batch_status(struct batch_handle *h, int status)
{
	((struct ofs_batch_hdr *)(void *)h->reply)->status = status;
}

/*
 * before: reservations made by earlier requests (this one's keys are
 * distinct); found: what batch_resolve said of the key.
 */
static int batch_reserve_one(struct ofs *ofs, struct batch_handle *h, size_t before,
			     const char *key, uint32_t klen, uint64_t size, int found,
			     struct ofs_batch_desc *d)
{
	struct ofs_store *s = &ofs->store;
	char full[OFS_KEY_MAX];
	struct kvb_map w;
	struct kvb_obj *obj;
	struct batch_resv *nr;
	size_t flen, k;
	int ret = found;

	for (k = 0; k < before; k++)
		if (h->resv[k].klen == klen && !memcmp(h->resv[k].key, key, klen))
			return -EBUSY;
	if (ret == 0)
		return -EEXIST;
	if (ret != -ENOENT)
		return ret;
	/* A create, as through the mount: refused in a tenant at its quota (evict=off). */
	pthread_mutex_lock(&s->lock);
	if (ofs_evict_quota_check(s, h->tenant))
		ret = -EDQUOT;
	pthread_mutex_unlock(&s->lock);
	if (ret != -ENOENT)
		return ret;
	if (ofs_store_meta_low(s))
		return -ENOSPC;
	if (h->nresv == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 64;

		nr = realloc(h->resv, cap * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		h->resv = nr;
		h->cap = cap;
	}
	flen = (size_t)snprintf(full, sizeof(full), "%s/%.*s", h->tname, (int)klen, key);
	if (flen >= sizeof(full))
		return -ENAMETOOLONG;
	/* Its growth, charged as a writer's (evict=off; a refused key leaves the others be). */
	ret = ofs_evict_quota_reserve(s, h->tenant, size);
	if (ret)
		return ret;
	ret = kvb_obj_open(&s->kvb, &KVB_MAP_EMPTY, full, flen, &obj);
	if (ret)
		return ret;
	ret = kvb_obj_reserve(&s->kvb, obj, size);
	if (ret == -ENOSPC && ofs_store_reclaim(s))
		ret = kvb_obj_reserve(&s->kvb, obj, size);
	nr = &h->resv[h->nresv];
	nr->key = ret ? NULL : malloc(klen);
	if (!ret && !nr->key)
		ret = -ENOMEM;
	if (ret) {
		kvb_obj_close(&s->kvb, obj);
		return ret;
	}
	memcpy(nr->key, key, klen);
	nr->klen = klen;
	nr->size = size;
	nr->obj = obj;
	nr->done = 0;
	h->nresv++;
	kvb_obj_view(&s->kvb, obj, &w);
	d->bucket = size ? w.bucket : -1;
	d->offset = size ? w.page * s->geom.page_size : 0;
	d->size = size;
	return 0;
}

static int batch_reserve(struct ofs *ofs, struct batch_handle *h, const struct batch_req *r)
{
	struct ofs_batch_desc *d = batch_reply_alloc(h, r, sizeof(*d));
	const struct kvb *kvb = &ofs->store.kvb;
	struct batch_dircache dc = { 0 };
	char name[META_NAME_MAX + 1];
	size_t before = h->nresv, k;
	struct kvb_obj **objs;
	uint32_t i, n = r->hdr->n;
	struct meta_inode m;
	int dup, defer, rd, *errs;
	uint64_t dir;

	if (!d)
		return -ENOMEM;
	dup = batch_has_dup(r);
	if (dup) {
		batch_status(h, dup < 0 ? dup : -EINVAL);
		return 0;
	}
	objs = calloc(n + 1, sizeof(*objs));
	errs = calloc(n + 1, sizeof(*errs));
	if (!objs || !errs) {
		free(objs);
		free(errs);
		return -ENOMEM;
	}
	/* Every key's directory and name first, in one hold of the lock and one read. */
	pthread_mutex_lock(&ofs->store.lock);
	rd = meta_read_begin(ofs->store.meta) == 0;
	for (i = 0; i < n; i++)
		d[i].err = batch_resolve(ofs, h->tenant, r->key[i], r->ent[i]->klen, &dir, name, &m,
					 &dc);
	if (rd)
		meta_read_end(ofs->store.meta);
	pthread_mutex_unlock(&ofs->store.lock);
	/* The runs' blocks at the end, adjacent runs of a bucket with one fallocate. */
	defer = kvb_reserve_begin(kvb) == 0;
	for (i = 0; i < n; i++) {
		size_t had = h->nresv;

		if (r->ent[i]->size > ofs->store.geom.bucket_size)
			d[i].err = -EFBIG;
		else
			d[i].err = batch_reserve_one(ofs, h, before, r->key[i], r->ent[i]->klen,
						     r->ent[i]->size, d[i].err, &d[i]);
		if (!d[i].err && h->nresv > had)
			objs[i] = h->resv[h->nresv - 1].obj;
	}
	if (defer)
		kvb_reserve_end(kvb, objs, n, errs);
	for (i = 0; defer && i < n; i++) {
		struct kvb_map w;
		int e;

		if (!errs[i])
			continue;
		/* No room where it was: once more on its own, every bucket tried. */
		e = kvb_obj_reserve(kvb, objs[i], r->ent[i]->size);
		if (e == -ENOSPC && ofs_store_reclaim(&ofs->store))
			e = kvb_obj_reserve(kvb, objs[i], r->ent[i]->size);
		if (e) {
			for (k = 0; k < h->nresv && h->resv[k].obj != objs[i]; k++)
				;
			if (k < h->nresv)
				batch_resv_drop(ofs, h, k);
			memset(&d[i], 0, sizeof(d[i]));
			d[i].err = e;
			continue;
		}
		kvb_obj_view(kvb, objs[i], &w);
		d[i].bucket = w.bucket;
		d[i].offset = w.page * ofs->store.geom.page_size;
	}
	free(objs);
	free(errs);
	return 0;
}

/* A committed file's descriptor, with what a client checks it by.  Under store.lock. */
static void batch_desc_of(const struct ofs_store *s, struct ofs_batch_desc *d, uint64_t ino,
			  const struct kvb_map *map, uint64_t csum)
{
	d->bucket = map->bucket;
	d->offset = map->bucket >= 0 ? map->page * s->geom.page_size : 0;
	d->size = map->size;
	d->csum = csum;
	d->ino = ino;
	ofs_epochs_get(s, ino, &d->gen, &d->epoch);
}

struct batch_commit_ent {
	ssize_t resv;
	struct kvb_map map;
	uint64_t csum;
	const uint64_t *pcs;
	int prepared, done;
	uint64_t dir, ino;
	char name[META_NAME_MAX + 1];
};

/* The verified entries as new files, in one transaction.  Under store.lock. */
static int batch_commit_records(struct ofs *ofs, struct batch_handle *h, const struct batch_req *r,
				struct batch_commit_ent *ce, struct ofs_batch_desc *st,
				const struct fuse_ctx *ctx, uint64_t *ncommitted)
{
	struct ofs_store *s = &ofs->store;
	int64_t now = ofs_now();
	struct batch_dircache dc = { 0 };
	struct meta_inode m;
	uint64_t last_dir = 0;
	uint32_t i;
	int ret = meta_begin(s->meta);

	for (i = 0; !ret && i < r->hdr->n; i++) {
		/* The name is not looked up: the insert finds it taken (EEXIST). */
		int e = batch_resolve(ofs, h->tenant, r->key[i], r->ent[i]->klen, &ce[i].dir,
				      ce[i].name, NULL, &dc);

		if (e == -ENOENT) {
			ret = e; /* a directory removed since the reserve */
			break;
		}
		if (e) {
			st[i].err = e;
			continue;
		}
		memset(&m, 0, sizeof(m));
		m.parent = ce[i].dir;
		m.mode = S_IFREG | (0666 & ~ctx->umask);
		m.uid = ctx->uid;
		m.gid = ctx->gid;
		m.atime = m.mtime = m.ctime = now;
		m.nlink = 1;
		m.prev_bucket = -1;
		m.size = ce[i].map.size;
		m.bucket = ce[i].map.bucket;
		m.page = ce[i].map.page;
		m.npages = ce[i].map.bucket >= 0 ? ce[i].map.npages : 0;
		m.csum = ce[i].csum;
		m.state = META_COMMITTED;
		m.gen = s->gen;
		/* Created committed: one row, one statement. */
		ret = meta_insert_object(s->meta, &m, ce[i].name, strlen(ce[i].name), ce[i].pcs,
					 m.npages);
		if (ret == -EEXIST) {
			/* Taken since the reserve: this entry only (its statement undone). */
			st[i].err = ret;
			ret = 0;
			continue;
		}
		/*
		 * A batch's keys usually share a directory: its times once
		 * per run of them.  This also refuses a directory removed
		 * since the reserve (ENOENT): no row names a dead parent.
		 */
		if (!ret && ce[i].dir != last_dir)
			ret = meta_dir_changed(s->meta, ce[i].dir, now, NULL);
		if (ret)
			break;
		last_dir = ce[i].dir;
		ce[i].ino = m.ino;
		ce[i].done = 1;
	}
	if (!ret)
		ret = meta_commit(s->meta);
	else
		meta_rollback(s->meta);
	*ncommitted = 0;
	for (i = 0; i < r->hdr->n; i++) {
		struct ofs_object *d;

		if (ret)
			ce[i].done = 0;
		if (!ce[i].done)
			continue;
		(*ncommitted)++;
		/* The new file's descriptor, which the client may keep. */
		batch_desc_of(s, &st[i], ce[i].ino, &ce[i].map, ce[i].csum);
		d = ofs_object_find(s, ce[i].dir);
		if (d)
			d->m.mtime = d->m.ctime = now;
	}
	s->nfiles += *ncommitted;
	return ret;
}

static int batch_commit(struct ofs *ofs, struct batch_handle *h, const struct batch_req *r,
			const struct fuse_ctx *ctx)
{
	struct ofs_store *s = &ofs->store;
	struct ofs_batch_desc *st = batch_reply_alloc(h, r, sizeof(*st));
	struct batch_commit_ent *ce;
	uint32_t i, n = r->hdr->n;
	int sync = (r->hdr->flags & OFS_BATCH_SYNC) != 0, bad = 0, ret = 0, dup;
	uint64_t ncommitted = 0, per;
	size_t hint = 0;

	if (!st)
		return -ENOMEM;
	dup = batch_has_dup(r);
	if (dup) {
		batch_status(h, dup < 0 ? dup : -EINVAL);
		return 0;
	}
	ce = calloc(n + 1, sizeof(*ce));
	if (!ce)
		return -ENOMEM;
	/* Verify: the pages as they are now against the client's sums, outside every lock. */
	for (i = 0; i < n; i++) {
		struct kvb_obj *obj;
		int e;

		ce[i].resv = batch_find_resv(h, r->key[i], r->ent[i]->klen, hint);
		if (ce[i].resv < 0) {
			st[i].err = -ENOENT; /* not reserved on this description */
			bad = bad ? bad : -ENOENT;
			continue;
		}
		hint = (size_t)ce[i].resv + 1;
		obj = h->resv[ce[i].resv].obj;
		e = r->ent[i]->size > h->resv[ce[i].resv].size ? -EINVAL :
			kvb_obj_adopt(&s->kvb, obj, r->ent[i]->size);
		/* With sync, the barrier below syncs every bucket adopt marked: once, not per key. */
		if (!e)
			e = kvb_obj_commit_prepare(&s->kvb, obj, 0, &ce[i].map, &ce[i].csum,
						   &ce[i].pcs);
		if (!e) {
			uint64_t np = ce[i].map.bucket >= 0 ? ce[i].map.npages : 0;

			ce[i].prepared = 1;
			if (r->ent[i]->npcs != np ||
			    memcmp(r->pcs[i], ce[i].pcs, np * sizeof(uint64_t)))
				e = -EBADMSG;
		}
		st[i].err = e;
		if (e && !bad)
			bad = e;
	}
	if (!bad) {
		pthread_mutex_lock(&s->lock);
		ret = batch_commit_records(ofs, h, r, ce, st, ctx, &ncommitted);
		pthread_mutex_unlock(&s->lock);
	}
	for (i = 0; i < n; i++) {
		if (ce[i].prepared)
			kvb_obj_commit_done(&s->kvb, h->resv[ce[i].resv].obj, ce[i].done);
		if (ret)
			st[i].err = ret;
	}
	if (bad || ret) {
		/* Nothing is visible; the reservations stay for a retry or an abort. */
		batch_status(h, bad ? bad : ret);
		free(ce);
		OFS_COUNT(s->metrics.commit_failures, 1);
		return 0;
	}
	OFS_COUNT(s->metrics.objects_committed, ncommitted);
	/*
	 * Committed pages now belong to their records (the working state
	 * shares them: closing frees nothing); an entry that was refused
	 * (its name taken meanwhile) gives its run back.  Every entry's
	 * reservation goes, in one pass over the description's.
	 */
	for (i = 0; i < n; i++)
		if (ce[i].resv >= 0)
			h->resv[ce[i].resv].done = 1;
	{
		size_t j, k = 0;

		for (j = 0; j < h->nresv; j++) {
			if (h->resv[j].done) {
				kvb_obj_close(&s->kvb, h->resv[j].obj);
				free(h->resv[j].key);
			} else {
				h->resv[k++] = h->resv[j];
			}
		}
		h->nresv = k;
	}
	if (sync)
		batch_status(h, ofs_store_barrier(s, NULL));
	/* The kernel may remember some of these names as missing (a stat before the put). */
	per = batch_seen_period(ofs);
	for (i = 0; i < n; i++) {
		size_t len = strlen(ce[i].name);

		if (ce[i].done && ofs->se && batch_seen_test(per, ce[i].dir, ce[i].name, len))
			fuse_lowlevel_notify_inval_entry(ofs->se, ce[i].dir, ce[i].name, len);
	}
	free(ce);
	return 0;
}

static int batch_lookup(struct ofs *ofs, struct batch_handle *h, const struct batch_req *r)
{
	struct ofs_batch_desc *d = batch_reply_alloc(h, r, sizeof(*d));
	struct batch_dircache dc = { 0 };
	char name[META_NAME_MAX + 1];
	struct meta_inode m;
	struct kvb_map map;
	uint64_t dir;
	uint32_t i;
	int64_t now = ofs_now();
	int rd;

	if (!d)
		return -ENOMEM;
	pthread_mutex_lock(&ofs->store.lock);
	/* The keys' lookups in one read of the metadata rather than one each. */
	rd = meta_read_begin(ofs->store.meta) == 0;
	for (i = 0; i < r->hdr->n; i++) {
		int e = batch_resolve(ofs, h->tenant, r->key[i], r->ent[i]->klen, &dir, name, &m,
				      &dc);

		if (!e) {
			struct ofs_object *o = ofs_object_find(&ofs->store, m.ino);

			if (o)
				m = o->m;
			if (S_ISDIR(m.mode))
				e = -EISDIR;
			else if (m.state != META_COMMITTED)
				e = -ENOENT;
		}
		d[i].err = e;
		if (e)
			continue;
		/* A use, as an OPEN is: batch-read keys are kept by eviction. */
		if (ofs_evict_touch_ino(&ofs->store, m.ino, now))
			ofs_queue_inval_attr(ofs, m.ino);
		map = ofs_committed(&m);
		batch_desc_of(&ofs->store, &d[i], m.ino, &map, m.csum);
	}
	if (rd)
		meta_read_end(ofs->store.meta);
	pthread_mutex_unlock(&ofs->store.lock);
	return 0;
}

static int batch_delete(struct ofs *ofs, struct batch_handle *h, const struct batch_req *r)
{
	struct ofs_batch_status *st = batch_reply_alloc(h, r, sizeof(*st));
	struct batch_dircache dc = { 0 };
	char name[META_NAME_MAX + 1];
	uint32_t i, n = r->hdr->n;
	uint64_t *dirs = calloc(n + 1, sizeof(*dirs));
	const char **names = calloc(n + 1, sizeof(*names));
	size_t *lens = calloc(n + 1, sizeof(*lens));
	int *errs = calloc(n + 1, sizeof(*errs)), ret = -ENOMEM;

	if (!st || !dirs || !names || !lens || !errs)
		goto out;
	/* Every key's directory in one hold of the lock; the names are looked up by the unlink. */
	pthread_mutex_lock(&ofs->store.lock);
	for (i = 0; i < n; i++) {
		const char *key = r->key[i], *slash = memrchr(key, '/', r->ent[i]->klen);

		errs[i] = batch_resolve(ofs, h->tenant, key, r->ent[i]->klen, &dirs[i], name, NULL,
					&dc);
		names[i] = slash ? slash + 1 : key; /* the last component, as resolved */
		lens[i] = r->ent[i]->klen - (size_t)(names[i] - key);
	}
	pthread_mutex_unlock(&ofs->store.lock);
	/* One transaction for the batch: each key deleted, or not, with its own result. */
	ret = ofs_ns_unlink_many(&ofs->store, dirs, names, lens, n, errs);
	for (i = 0; !ret && i < n; i++) {
		st[i].err = errs[i];
		/* The kernel's cached entry names a file that is gone. */
		if (!errs[i] && ofs->se)
			fuse_lowlevel_notify_inval_entry(ofs->se, dirs[i], names[i], lens[i]);
	}
out:
	free(dirs);
	free(names);
	free(lens);
	free(errs);
	return ret;
}

static int batch_abort(struct ofs *ofs, struct batch_handle *h, const struct batch_req *r)
{
	struct ofs_batch_status *st = batch_reply_alloc(h, r, sizeof(*st));
	uint32_t i;

	if (!st)
		return -ENOMEM;
	for (i = 0; i < r->hdr->n; i++) {
		ssize_t k = batch_find_resv(h, r->key[i], r->ent[i]->klen, 0);

		st[i].err = k < 0 ? -ENOENT : 0;
		if (k >= 0)
			batch_resv_drop(ofs, h, (size_t)k);
	}
	return 0;
}

static int batch_info(struct ofs *ofs, struct batch_handle *h, const struct batch_req *r)
{
	struct ofs_batch_info *in;
	size_t len = sizeof(struct ofs_batch_hdr) + sizeof(*in);
	struct ofs_batch_hdr *hdr;

	free(h->reply);
	h->rlen = 0;
	h->reply = calloc(1, len);
	if (!h->reply)
		return -ENOMEM;
	hdr = (void *)h->reply;
	hdr->magic = OFS_BATCH_MAGIC;
	hdr->op = r->hdr->op;
	hdr->len = (uint32_t)len;
	in = (void *)(h->reply + sizeof(*hdr));
	in->page_size = ofs->store.geom.page_size;
	in->bucket_count = ofs->store.geom.bucket_count;
	in->flags = (ofs->store.verify ? OFS_BATCH_INFO_VERIFY : 0) |
		    (ofs->store.epochs ? OFS_BATCH_INFO_EPOCHS : 0);
	in->rootlen = (uint32_t)strlen(ofs->store.root);
	if (in->rootlen >= sizeof(in->root))
		return -ENAMETOOLONG;
	memcpy(in->root, ofs->store.root, in->rootlen);
	h->rlen = len;
	/* Batches move data through the bucket files: only the pages backend has them. */
	if (strcmp(kvb_name(&ofs->store.kvb), "pages") != 0)
		hdr->status = -EOPNOTSUPP;
	return 0;
}

static int batch_request(struct ofs *ofs, struct batch_handle *h, const char *buf, size_t size,
			 const struct fuse_ctx *ctx)
{
	struct batch_req r = { 0 };
	int ret = batch_parse(buf, size, &r);

	if (!ret && r.hdr->op != OFS_BATCH_INFO && strcmp(kvb_name(&ofs->store.kvb), "pages"))
		ret = -EOPNOTSUPP;
	if (!ret) {
		switch (r.hdr->op) {
		case OFS_BATCH_INFO: ret = batch_info(ofs, h, &r); break;
		case OFS_BATCH_RESERVE: ret = batch_reserve(ofs, h, &r); break;
		case OFS_BATCH_COMMIT: ret = batch_commit(ofs, h, &r, ctx); break;
		case OFS_BATCH_LOOKUP: ret = batch_lookup(ofs, h, &r); break;
		case OFS_BATCH_DELETE: ret = batch_delete(ofs, h, &r); break;
		case OFS_BATCH_ABORT: ret = batch_abort(ofs, h, &r); break;
		default: ret = -EINVAL;
		}
	}
	free(r.ent);
	free(r.key);
	free(r.pcs);
	return ret;
}

static void batch_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct batch_handle *h = (struct batch_handle *)(uintptr_t)fi->fh;
	int ret;

	if (!batch_ino(ino)) {
		ofs_ll_ops.write(req, ino, buf, size, off, fi);
		return;
	}
	if (!h) {
		fuse_reply_err(req, EBADF);
		return;
	}
	pthread_mutex_lock(&h->lock);
	free(h->reply);
	h->reply = NULL;
	h->rlen = 0;
	ret = off != 0 ? -EINVAL : batch_request(ofs, h, buf, size, fuse_req_ctx(req));
	pthread_mutex_unlock(&h->lock);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_write(req, size);
}

/* The control file answers requests: it is no file to copy bytes from or into. */
static void batch_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
				     struct fuse_file_info *fi_in, fuse_ino_t ino_out,
				     off_t off_out, struct fuse_file_info *fi_out, size_t len,
				     int flags)
{
	if (batch_ino(ino_in) || batch_ino(ino_out))
		fuse_reply_err(req, EINVAL);
	else
		ofs_ll_ops.copy_file_range(req, ino_in, off_in, fi_in, ino_out, off_out, fi_out,
					   len, flags);
}

/* A name that shadows the control file cannot be made in a tenant. */
static void batch_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			    struct fuse_file_info *fi)
{
	if (strcmp(name, OFS_BATCH_NAME) == 0)
		fuse_reply_err(req, EEXIST);
	else
		ofs_ll_ops.create(req, parent, name, mode, fi);
}

static void batch_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	if (strcmp(name, OFS_BATCH_NAME) == 0)
		fuse_reply_err(req, EEXIST);
	else
		ofs_ll_ops.mkdir(req, parent, name, mode);
}

static void batch_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
			    fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	if (strcmp(name, OFS_BATCH_NAME) == 0 || strcmp(newname, OFS_BATCH_NAME) == 0)
		fuse_reply_err(req, EPERM);
	else
		ofs_ll_ops.rename(req, parent, name, newparent, newname, flags);
}

static void batch_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (strcmp(name, OFS_BATCH_NAME) == 0)
		fuse_reply_err(req, EPERM);
	else
		ofs_ll_ops.unlink(req, parent, name);
}

const struct fuse_lowlevel_ops *ofs_batch_ops(void)
{
	static struct fuse_lowlevel_ops ops;

	ops = ofs_ll_ops;
	ops.destroy = batch_op_destroy;
	ops.lookup = batch_op_lookup;
	ops.forget = batch_op_forget;
	ops.forget_multi = batch_op_forget_multi;
	ops.getattr = batch_op_getattr;
	ops.setattr = batch_op_setattr;
	ops.open = batch_op_open;
	ops.read = batch_op_read;
	ops.write = batch_op_write;
	ops.copy_file_range = batch_op_copy_file_range;
	ops.flush = batch_op_flush;
	ops.release = batch_op_release;
	ops.create = batch_op_create;
	ops.mkdir = batch_op_mkdir;
	ops.rename = batch_op_rename;
	ops.unlink = batch_op_unlink;
	return &ops;
}
