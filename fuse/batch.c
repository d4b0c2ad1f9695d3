/*
 * batch.c: the batch control file, TENANT/.offload-batch (docs/batch.md).
 *
 * A client writes one request and reads its reply: two FUSE round trips
 * per batch, whatever its size.  Each open description is a struct
 * ofs_batch of the store (store/batch.h), which runs the requests; this
 * file serves the control file and tells the kernel what they changed.
 *
 * The file is not in the database: its inode number is the tenant's with
 * OFS_BATCH_INO set, and the ops here wrap the table of ll.c for it.
 */
#include "ofs.h"
#include "batch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "offloadfs_batch_proto.h"

#define OFS_BATCH_INO (1ULL << 62) /* AUTOINCREMENT inode numbers never get there */

struct batch_handle {
	struct ofs_batch *b;
	struct batch_handle *next, *prev; /* batch_all; batch_all_lock */
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
	ret = ofs_batch_tenant(&ofs->store, parent, &t);
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
	ret = ofs_batch_tenant(&ofs->store, ino & ~OFS_BATCH_INO, &t);
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
	ret = ofs_batch_open(&ofs->store, ino & ~OFS_BATCH_INO, &h->b);
	if (ret) {
		free(h);
		fuse_reply_err(req, -ret);
		return;
	}
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
		ofs_batch_close(&ofs->store, h->b);
		free(h);
	}
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
	ofs_batch_close(&ofs->store, h->b);
	free(h);
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
	for (h = batch_all.next; h != &batch_all; h = h->next)
		ofs_batch_drop_reserved(&ofs->store, h->b);
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

static int batch_send(void *arg, const char *p, size_t len)
{
	return fuse_reply_buf(arg, p, len);
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
	if (off < 0)
		fuse_reply_buf(req, NULL, 0);
	else
		ofs_batch_reply(h->b, (uint64_t)off, size, batch_send, req);
}

/* The kernel's caches after a request (struct ofs_batch_caller). */
static void batch_added(void *arg, uint64_t dir, const char *name, size_t len)
{
	struct ofs *ofs = arg;

	if (ofs->se && batch_seen_test(batch_seen_period(ofs), dir, name, len))
		fuse_lowlevel_notify_inval_entry(ofs->se, dir, name, len);
}

static void batch_removed(void *arg, uint64_t dir, const char *name, size_t len)
{
	struct ofs *ofs = arg;

	/* The kernel's cached entry names a file that is gone. */
	if (ofs->se)
		fuse_lowlevel_notify_inval_entry(ofs->se, dir, name, len);
}

static void batch_used(void *arg, uint64_t ino)
{
	ofs_queue_inval_attr(arg, ino);
}

static void batch_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct batch_handle *h = (struct batch_handle *)(uintptr_t)fi->fh;
	const struct fuse_ctx *ctx;
	struct ofs_batch_caller c;
	int ret;

	if (!batch_ino(ino)) {
		ofs_ll_ops.write(req, ino, buf, size, off, fi);
		return;
	}
	if (!h) {
		fuse_reply_err(req, EBADF);
		return;
	}
	ctx = fuse_req_ctx(req);
	c = (struct ofs_batch_caller){
		.uid = ctx->uid, .gid = ctx->gid, .umask = ctx->umask,
		.added = batch_added, .removed = batch_removed, .used = batch_used, .arg = ofs,
	};
	/* A write elsewhere than at 0 is no request: refused, as a malformed one is. */
	ret = ofs_batch_request(&ofs->store, h->b, off ? NULL : buf, off ? 0 : size, &c);
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

/*
 * 1 when name in parent is a tenant's control file.  The name is special
 * only there, as lookup answers it: below a tenant's top level (and at
 * the root, among the tenants) it is an ordinary name, to make, rename
 * and remove like any other, as a batch put of "sub/.offload-batch" does.
 */
static int batch_is_ctl(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct meta_inode t;

	return strcmp(name, OFS_BATCH_NAME) == 0 &&
	       ofs_batch_tenant(&ofs_of(req)->store, parent, &t) == 0;
}

/* A name that shadows the control file cannot be made in a tenant: it is there. */
static void batch_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			    struct fuse_file_info *fi)
{
	if (batch_is_ctl(req, parent, name))
		fuse_reply_err(req, EEXIST);
	else
		ofs_ll_ops.create(req, parent, name, mode, fi);
}

static void batch_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			   dev_t rdev)
{
	if (batch_is_ctl(req, parent, name))
		fuse_reply_err(req, EEXIST);
	else
		ofs_ll_ops.mknod(req, parent, name, mode, rdev);
}

static void batch_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	if (batch_is_ctl(req, parent, name))
		fuse_reply_err(req, EEXIST);
	else
		ofs_ll_ops.mkdir(req, parent, name, mode);
}

static void batch_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
			    fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	if (batch_is_ctl(req, parent, name) || batch_is_ctl(req, newparent, newname))
		fuse_reply_err(req, EPERM);
	else
		ofs_ll_ops.rename(req, parent, name, newparent, newname, flags);
}

static void batch_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (batch_is_ctl(req, parent, name))
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
	ops.mknod = batch_op_mknod;
	ops.mkdir = batch_op_mkdir;
	ops.rename = batch_op_rename;
	ops.unlink = batch_op_unlink;
	return &ops;
}
