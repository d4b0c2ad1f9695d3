/*
 * ll.c: the FUSE low-level operations and their one table.
 *
 * Each op does its work in helpers that return 0 or a negative errno and
 * sends exactly one reply at the end.  Nothing may touch an inode after its
 * reply: the kernel can then release and forget it, and another thread free
 * it.  Lock order: an inode's rw lock, then store.lock; never the other way
 * round.
 */
#include "ll.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>

static void ofs_op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ofs *ofs = userdata;

	/* A KV block of up to OFS_MAX_REQUEST is one write and one read. */
	conn->max_write = OFS_MAX_REQUEST;
	conn->max_readahead = OFS_MAX_REQUEST;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	/*
	 * O_TRUNC arrives with the open and truncates the writer's working
	 * state.  Without it the kernel sends a SETATTR without a file handle,
	 * which we must treat as truncate(2) and commit at once: a crash before
	 * the close would then leave the file empty instead of as it was.
	 */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/*
	 * Every byte reaches the store through this mount, so a changed mtime
	 * never means the kernel's cached pages are stale: without this the
	 * kernel dropped the pages a put had just written, and the next get
	 * went to the daemon (scripts/bench found it).
	 */
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
	(void)ofs;
}

static void ofs_op_destroy(void *userdata)
{
	struct ofs *ofs = userdata;

	/*
	 * Writers still open at unmount (a lazy unmount, an aborted
	 * connection) were never closed: drop their working state, as a crash
	 * would, so that only closed or fsynced content is in the snapshot;
	 * records of unlinked files still open are deleted.  The kernel
	 * forgets everything: the table is emptied.
	 */
	ofs_table_release(ofs);
}

static void ofs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ofs *ofs = ofs_of(req);
	struct fuse_entry_param e;
	struct meta_inode m;
	int ret = ofs_ns_check_name(name);

	if (!ret) {
		pthread_mutex_lock(&ofs->store.lock);
		ret = meta_lookup(ofs->store.meta, parent, name, strlen(name), &m);
		if (!ret)
			ret = ofs_entry(ofs, &m, &e);
		pthread_mutex_unlock(&ofs->store.lock);
	}
	if (ret == -ENOENT) {
		/* A cached miss: we own the namespace, so the kernel may remember it. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = ofs->timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_entry(req, &e);
}

static void ofs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct ofs *ofs = ofs_of(req);

	pthread_mutex_lock(&ofs->store.lock);
	ofs_forget_one(ofs, ino, nlookup);
	pthread_mutex_unlock(&ofs->store.lock);
	fuse_reply_none(req);
}

static void ofs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct ofs *ofs = ofs_of(req);
	size_t i;

	pthread_mutex_lock(&ofs->store.lock);
	for (i = 0; i < count; i++)
		ofs_forget_one(ofs, forgets[i].ino, forgets[i].nlookup);
	pthread_mutex_unlock(&ofs->store.lock);
	fuse_reply_none(req);
}

static void ofs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in;
	struct meta_inode m;
	struct stat st;
	int ret = 0;

	(void)fi;
	pthread_mutex_lock(&ofs->store.lock);
	in = ofs_ifind(ofs, ino);
	if (in)
		ofs_fill_stat(ofs, in, &in->o.m, &st);
	else if (!(ret = meta_get(ofs->store.meta, ino, &m)))
		ofs_fill_stat(ofs, NULL, &m, &st);
	pthread_mutex_unlock(&ofs->store.lock);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, ofs->timeout);
}

/*
 * truncate(2) and ftruncate(2): a file without a writer is held like an
 * open one for a working state of its own, committed at once.
 */
static int ofs_setattr_size(struct ofs *ofs, struct ofs_inode *in, uint64_t size, int from_fd)
{
	int temporary = !in->o.obj, ret;

	if (S_ISDIR(in->o.m.mode))
		return -EISDIR;
	if (temporary) {
		/* Held like an open file: a concurrent unlink must detach, not free. */
		pthread_mutex_lock(&ofs->store.lock);
		ret = in->o.unlinked == 1 ? -ENOENT : 0;
		if (!ret)
			in->o.nopen++;
		pthread_mutex_unlock(&ofs->store.lock);
		if (ret)
			return ret;
		ret = ofs_object_open(&ofs->store, &in->o);
		if (ret)
			goto out;
	}
	ret = ofs_object_truncate(&ofs->store, &in->o, size);
	/* truncate(2) by path holds once it returns; ftruncate joins its writer's commit. */
	if (!ret && (!from_fd || temporary))
		ret = ofs_object_commit(&ofs->store, &in->o, 0);
	if (temporary)
		ofs_object_close(&ofs->store, &in->o);
out:
	if (temporary) {
		pthread_mutex_lock(&ofs->store.lock);
		ofs_iclose(ofs, in);
		pthread_mutex_unlock(&ofs->store.lock);
	}
	return ret;
}

/* The attributes setattr asks for, applied to m (size is done apart). */
static void ofs_attr_apply(struct meta_inode *m, const struct stat *attr, int to_set, int64_t now)
{
	if (to_set & FUSE_SET_ATTR_MODE)
		m->mode = (m->mode & S_IFMT) | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_UID)
		m->uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		m->gid = attr->st_gid;
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		m->atime = now;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		m->atime = (int64_t)attr->st_atim.tv_sec * 1000000000 + attr->st_atim.tv_nsec;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		m->mtime = now;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		m->mtime = (int64_t)attr->st_mtim.tv_sec * 1000000000 + attr->st_mtim.tv_nsec;
	else if (to_set & FUSE_SET_ATTR_SIZE)
		m->mtime = now;
	if (to_set & FUSE_SET_ATTR_CTIME)
		m->ctime = (int64_t)attr->st_ctim.tv_sec * 1000000000 + attr->st_ctim.tv_nsec;
	else
		m->ctime = now;
}

static void ofs_do_setattr(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, struct stat *attr, int to_set,
			   struct fuse_file_info *fi, struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	int64_t now = ofs_now();
	struct meta_inode m;
	struct stat st;
	int ret = 0;

	if (!in) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	pthread_rwlock_wrlock(ofs_rw(ofs, in));
	if (to_set & FUSE_SET_ATTR_SIZE)
		ret = ofs_setattr_size(ofs, in, (uint64_t)attr->st_size, fi != NULL);
	pthread_mutex_lock(&ofs->store.lock);
	if (!ret) {
		m = in->o.m;
		ofs_attr_apply(&m, attr, to_set, now);
		ret = ofs_object_update(&ofs->store, &in->o, &m);
		ofs_fill_stat(ofs, in, &in->o.m, &st);
	}
	pthread_mutex_unlock(&ofs->store.lock);
	pthread_rwlock_unlock(ofs_rw(ofs, in));
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, ofs->timeout);
}

static void ofs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			   struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_setattr(req, ino, attr, to_set, fi, in);
	ofs_iput(ofs, in);
}

/*
 * Count an open of in and make it ready: a prefill of the kernel's cache
 * for the first reader, a working state for a writer.  On failure nothing
 * is counted.
 */
static int ofs_open_inode(struct ofs *ofs, struct ofs_inode *in, int writer, int trunc,
			  int *direct, int *keep)
{
	int ret = 0, prefill;

	/*
	 * Counted open before the working state exists: an unlink from now on
	 * detaches the record instead of deleting it and freeing the pages
	 * this writer may append to.  A record already deleted cannot take a
	 * commit any more.
	 */
	pthread_mutex_lock(&ofs->store.lock);
	if (in->o.unlinked == 1)
		ret = -ENOENT;
	else if (writer)
		ret = ofs_evict_quota_check(&ofs->store, in->o.m.ino);
	if (!ret)
		in->o.nopen++;
	/* Every open waits for a prefill in progress: see ofs_prefill. */
	while (!ret && in->kfresh == 2)
		pthread_cond_wait(&ofs->kcond, &ofs->store.lock);
	prefill = !ret && !writer && in->kfresh == 1 && ofs->prefill_max;
	/* A failed open changes nothing: another open's prefill may be running (2). */
	if (!ret)
		in->kfresh = prefill ? 2 : 0;
	/*
	 * Beside a handle writing around the cache, this one must too, or
	 * its cached pages would miss those writes; pages any such open
	 * leaves behind (a private mapping's) go at the next plain open.
	 */
	*direct = !ret && in->ndirect > 0;
	*keep = 1;
	if (*direct) {
		in->ndirect++;
		in->kstale = 1;
	} else if (!ret && in->kstale) {
		in->kstale = 0;
		*keep = 0;
	}
	pthread_mutex_unlock(&ofs->store.lock);
	if (prefill) {
		/* A value the backend has lost is a file that is gone. */
		ret = ofs_prefill(ofs, in) < 0 ? -ENOENT : 0;
		pthread_mutex_lock(&ofs->store.lock);
		in->kfresh = 0;
		pthread_cond_broadcast(&ofs->kcond);
		if (ret) {
			ofs_direct_close(in, *direct);
			ofs_iclose(ofs, in);
		}
		pthread_mutex_unlock(&ofs->store.lock);
	}
	if (!ret && writer) {
		ret = ofs_object_open_writer(&ofs->store, &in->o, trunc);
		if (ret) {
			pthread_mutex_lock(&ofs->store.lock);
			ofs_direct_close(in, *direct);
			in->kstale |= !*keep; /* its pages were never dropped */
			ofs_iclose(ofs, in);
			pthread_mutex_unlock(&ofs->store.lock);
		}
	}
	if (!ret && !writer) {
		pthread_mutex_lock(&ofs->store.lock);
		OFS_COUNT(ofs->store.metrics.objects_read, 1);
		ofs_promotion_policy(ofs, in);
		pthread_mutex_unlock(&ofs->store.lock);
	}
	if (!ret) {
		/*
		 * Recency is per open: warm reads never reach us.  The kernel
		 * keeps its cached attributes: dropping them would make the
		 * stat after every get a GETATTR, so st_atime shows the open
		 * at the kernel's next attribute reply (relatime's lag).
		 */
		pthread_mutex_lock(&ofs->store.lock);
		ofs_evict_touch(&ofs->store, &in->o);
		pthread_mutex_unlock(&ofs->store.lock);
	}
	return ret;
}

/* Undo an open whose reply the opener never got, as release would. */
static void ofs_open_undo(struct ofs *ofs, struct ofs_inode *in, int writer, int direct, int keep)
{
	pthread_rwlock_wrlock(ofs_rw(ofs, in));
	if (writer && ofs_writer_gone(&in->o))
		ofs_object_close(&ofs->store, &in->o);
	pthread_rwlock_unlock(ofs_rw(ofs, in));
	pthread_mutex_lock(&ofs->store.lock);
	ofs_direct_close(in, direct);
	in->kstale |= !keep; /* the kernel never saw the reply that dropped its pages */
	ofs_iclose(ofs, in);
	pthread_mutex_unlock(&ofs->store.lock);
}

static void ofs_do_open(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, struct fuse_file_info *fi,
			struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	/* O_RDONLY|O_TRUNC truncates too (Linux does; the kernel checked write access). */
	int writer = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC), ret;
	int direct = 0, keep = 1;

	if (!in)
		ret = -ESTALE;
	else if (S_ISDIR(in->o.m.mode))
		ret = -EISDIR;
	else
		ret = ofs_open_inode(ofs, in, writer, fi->flags & O_TRUNC, &direct, &keep);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	fi->fh = (writer ? OFS_FH_WRITER : 0) | (direct ? OFS_FH_DIRECT : 0);
	fi->direct_io = direct;
	/* Every write goes through this mount, so the kernel's cache stays right. */
	fi->keep_cache = keep;
	/* A reader's close has nothing to commit: no FLUSH round trip for it. */
	fi->noflush = !writer;
	if (fuse_reply_open(req, fi) == -ENOENT)
		ofs_open_undo(ofs, in, writer, direct, keep); /* the opener was interrupted */
}

static void ofs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_open(req, ino, fi, in);
	ofs_iput(ofs, in);
}

static void ofs_do_read(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, size_t size, off_t off,
			struct fuse_file_info *fi, struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	uint64_t t0 = ofs_now_ns();
	struct ofs_bytes b;
	pthread_rwlock_t *lk;
	ssize_t n;

	if (!in) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	/*
	 * Once the reply is sent the kernel may release and forget the inode
	 * and another thread free it: after the reply only the stripe lock,
	 * which is never freed, may be touched.
	 */
	lk = ofs_rw(ofs, in);
	pthread_rwlock_rdlock(lk);
	/*
	 * The READ carries the descriptor's flags (fuse_read_in.flags): an
	 * O_DIRECT reader's bytes skip the bucket's page cache too, as they
	 * skip the kernel's cache of our file.
	 */
	n = ofs_read(ofs, in, size, (uint64_t)off, fi && (fi->flags & O_DIRECT), &b);
	if (n < 0) {
		/* An open file whose value is lost: its bytes cannot be read. */
		fuse_reply_err(req, n == -ENOENT ? EIO : (int)-n);
	} else if (b.fd >= 0) {
		struct fuse_bufvec bv = ofs_bytes_vec(&b, (size_t)n);

		OFS_COUNT(ofs->store.metrics.bytes_read, (size_t)n);
		fuse_reply_data(req, &bv, 0); /* spliced from the bucket file */
	} else {
		OFS_COUNT(ofs->store.metrics.bytes_read, (size_t)n);
		fuse_reply_buf(req, b.ptr, (size_t)n);
	}
	ofs_bytes_release(&ofs->store, &b);
	pthread_rwlock_unlock(lk);
	ofs_hist_observe(&ofs->store.metrics.read_lat, ofs_now_ns() - t0);
}

static void ofs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_read(req, ino, size, off, fi, in);
	ofs_iput(ofs, in);
}

/*
 * A write through a handle that bypasses the kernel's cache drops the
 * set-user-ID bit, and the set-group-ID bit of a group-executable file, as
 * the kernel's cached path does (file_remove_privs): the kernel leaves it
 * to us there (FUSE_WRITE_KILL_SUIDGID, which libfuse 3.14 does not pass
 * on), and the bits may have been set since the create.  Root keeps them,
 * as CAP_FSETID does.  Under the inode's data lock.
 */
static int ofs_write_kill_setid(struct ofs *ofs, fuse_req_t req, struct ofs_inode *in)
{
	mode_t kill;
	struct meta_inode m;
	int ret = 0;

	pthread_mutex_lock(&ofs->store.lock);
	kill = in->o.m.mode & S_ISUID;
	if ((in->o.m.mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
		kill |= S_ISGID;
	if (kill && fuse_req_ctx(req)->uid != 0) {
		m = in->o.m;
		m.mode &= ~kill;
		m.ctime = ofs_now();
		ret = ofs_object_update(&ofs->store, &in->o, &m);
	}
	pthread_mutex_unlock(&ofs->store.lock);
	/*
	 * The kernel marks only times and size stale after a direct write: its
	 * cached mode goes before the reply (attributes only: no lock taken).
	 */
	if (kill && !ret && ofs->se)
		fuse_lowlevel_notify_inval_inode(ofs->se, in->o.m.ino, -1, 0);
	return ret;
}

static void ofs_do_write(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, const char *buf, size_t size, off_t off,
			 struct fuse_file_info *fi, struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	uint64_t t0 = ofs_now_ns();
	ssize_t n = 0;

	if (!in) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	pthread_rwlock_wrlock(ofs_rw(ofs, in));
	if (fi->fh & OFS_FH_DIRECT)
		n = ofs_write_kill_setid(ofs, req, in);
	if (n == 0)
		n = ofs_object_write(&ofs->store, &in->o, buf, size, (uint64_t)off);
	/*
	 * An O_DIRECT write through a cached handle skips the kernel's cache,
	 * and an asynchronous one leaves it as it was when it completes: a
	 * page another handle read meanwhile keeps the old bytes. The next
	 * open drops them rather than keep them.
	 */
	if (n > 0 && (fi->flags & O_DIRECT) && !fi->writepage && !(fi->fh & OFS_FH_DIRECT)) {
		pthread_mutex_lock(&ofs->store.lock);
		in->kstale = 1;
		pthread_mutex_unlock(&ofs->store.lock);
	}
	pthread_rwlock_unlock(ofs_rw(ofs, in));
	ofs_hist_observe(&ofs->store.metrics.write_lat, ofs_now_ns() - t0);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void ofs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_write(req, ino, buf, size, off, fi, in);
	ofs_iput(ofs, in);
}

static void ofs_do_flush(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, struct fuse_file_info *fi,
			 struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	int ret = 0, stale = 0;

	if (in && (fi->fh & OFS_FH_WRITER)) {
		pthread_rwlock_wrlock(ofs_rw(ofs, in));
		ret = ofs_object_flush(&ofs->store, &in->o, &stale);
		pthread_rwlock_unlock(ofs_rw(ofs, in));
		if (stale)
			ofs_queue_inval(ofs, ino); /* the kernel still caches the dropped bytes */
	}
	fuse_reply_err(req, -ret);
}

static void ofs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_flush(req, ino, fi, in);
	ofs_iput(ofs, in);
}

/*
 * A put's bytes into the kernel's cache once its write-only create's
 * handle is gone (ofs_direct_close gave kfresh 1 back): the first get after
 * the put then reads them there, with no request but its OPEN, as a warm
 * get does.  The release is asynchronous for the putter, so this is off
 * its path.  It is the prefill of the first open (rules in ofs_prefill),
 * done by the release while it holds the inode open: opens wait for it
 * (kfresh 2), an unlink meanwhile detaches the record rather than free
 * its pages.  At most OFS_STORE_MAX at once: more puts releasing together
 * leave their first reader's open to prefill.  Under store.lock: 1 when
 * the caller is to run ofs_release_store after its reply.
 */
static int ofs_release_store_begin(struct ofs *ofs, struct ofs_inode *in, int fresh)
{
	if (!fresh || !ofs->prefill_max || in->o.unlinked || in->o.obj ||
	    in->o.m.state != META_COMMITTED || in->o.m.size == 0 ||
	    in->o.m.size > ofs->prefill_max || ofs->nstoring >= OFS_STORE_MAX)
		return 0;
	ofs->nstoring++;
	in->kfresh = 2;
	in->o.nopen++;
	return 1;
}

static void ofs_release_store(struct ofs *ofs, struct ofs_inode *in)
{
	int stored = ofs_prefill(ofs, in);

	ofs_object_prepare_last_close(&ofs->store, &in->o);
	pthread_mutex_lock(&ofs->store.lock);
	/* Nothing stored: the kernel still caches no page, the first open may try. */
	in->kfresh = stored > 0 ? 0 : 1;
	ofs->nstoring--;
	pthread_cond_broadcast(&ofs->kcond);
	ofs_iclose(ofs, in);
	pthread_mutex_unlock(&ofs->store.lock);
}

static void ofs_do_release(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, struct fuse_file_info *fi,
			   struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	int stale = 0, store;

	if (!in) {
		fuse_reply_err(req, 0);
		return;
	}
	if (fi->fh & OFS_FH_WRITER) {
		pthread_rwlock_wrlock(ofs_rw(ofs, in));
		ofs_object_release_writer(&ofs->store, &in->o, &stale);
		pthread_rwlock_unlock(ofs_rw(ofs, in));
		if (stale)
			ofs_queue_inval(ofs, ino); /* the kernel still caches the dropped bytes */
	}
	ofs_object_prepare_last_close(&ofs->store, &in->o);
	pthread_mutex_lock(&ofs->store.lock);
	store = ofs_release_store_begin(ofs, in, ofs_direct_close(in, fi->fh & OFS_FH_DIRECT));
	ofs_iclose(ofs, in);
	pthread_mutex_unlock(&ofs->store.lock);
	fuse_reply_err(req, 0);
	/* The inode is held open (and by the request) until the store is done. */
	if (store)
		ofs_release_store(ofs, in);
}

static void ofs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_release(req, ino, fi, in);
	ofs_iput(ofs, in);
}

static void ofs_do_fsync(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, int datasync, struct fuse_file_info *fi, struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	int ret = -ESTALE;

	(void)datasync;
	(void)fi;
	if (in) {
		pthread_rwlock_wrlock(ofs_rw(ofs, in));
		ret = ofs_object_commit(&ofs->store, &in->o, 1);
		pthread_rwlock_unlock(ofs_rw(ofs, in));
	}
	fuse_reply_err(req, -ret);
}

static void ofs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_fsync(req, ino, datasync, fi, in);
	ofs_iput(ofs, in);
}

static void ofs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			    struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	int ret;

	(void)ino;
	(void)datasync;
	(void)fi;
	ret = ofs_store_barrier(&ofs->store, NULL);
	fuse_reply_err(req, -ret);
}

#define OFS_FALLOC_MODES (FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)

/*
 * Mode 0 grows the file (the run reserved, the new bytes zeros).  KEEP_SIZE
 * reserves the run past the end while the file is open for writing (a
 * commit keeps what the size needs).  PUNCH_HOLE and ZERO_RANGE write
 * zeros (ofs_object_fallocate).
 */
static void ofs_do_fallocate(fuse_req_t req, fuse_ino_t ino OFS_UNUSED, int mode, off_t off, off_t len,
			     struct fuse_file_info *fi, struct ofs_inode *in)
{
	struct ofs *ofs = ofs_of(req);
	int zero = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE), keep = mode & FALLOC_FL_KEEP_SIZE;
	uint64_t end;
	int ret;

	(void)fi;
	/* As the kernel has it: a hole keeps the size, and is not also a zeroed range. */
	if ((mode & ~OFS_FALLOC_MODES) || zero == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) ||
	    ((mode & FALLOC_FL_PUNCH_HOLE) && !keep)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (!in || off < 0 || len <= 0) {
		fuse_reply_err(req, in ? EINVAL : ESTALE);
		return;
	}
	end = (uint64_t)off + (uint64_t)len;
	if (end > (uint64_t)INT64_MAX) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	pthread_rwlock_wrlock(ofs_rw(ofs, in));
	ret = ofs_object_fallocate(&ofs->store, &in->o, mode, (uint64_t)off, end);
	pthread_rwlock_unlock(ofs_rw(ofs, in));
	fuse_reply_err(req, -ret);
}

static void ofs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			     struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *in = ofs_iget(ofs, ino);

	ofs_do_fallocate(req, ino, mode, off, len, fi, in);
	ofs_iput(ofs, in);
}

/* Longest copy in one request: the reply's count is 32 bits; callers loop on a short copy. */
#define OFS_MAX_COPY (1u << 30)

/*
 * copy_file_range(2).  The kernel has checked the modes, O_APPEND, the
 * flags, and the overlap of one file's ranges, and cut the length at the
 * source's size as it caches it (fs/read_write.c
 * generic_copy_file_checks); we check again what the store relies on.
 * Across tenants too: it is a read and a write.  Every backend copies
 * (through memory if it must): an EOPNOTSUPP would have the kernel copy
 * through READ and WRITE requests instead, and ENOSYS would stop it
 * asking for the rest of the mount (fs/fuse/file.c fuse_copy_file_range,
 * __fuse_copy_file_range).  The destination's stripe is taken
 * exclusively, the source's shared, the lower stripe first.
 */
static void ofs_do_copy(fuse_req_t req, struct ofs_inode *src, off_t off_in, struct ofs_inode *dst,
			off_t off_out, struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct ofs *ofs = ofs_of(req);
	pthread_rwlock_t *lin, *lout;
	ssize_t n;

	if (!src || !dst)
		n = -ESTALE;
	else if (flags || off_in < 0 || off_out < 0)
		n = -EINVAL;
	else if (!(fi_out->fh & OFS_FH_WRITER))
		n = -EBADF; /* not open for writing */
	else if (S_ISDIR(src->o.m.mode) || S_ISDIR(dst->o.m.mode))
		n = -EISDIR;
	else
		n = 0;
	if (n) {
		fuse_reply_err(req, (int)-n);
		return;
	}
	if (len > OFS_MAX_COPY)
		len = OFS_MAX_COPY;
	lin = ofs_rw(ofs, src);
	lout = ofs_rw(ofs, dst);
	if (lin == lout) {
		pthread_rwlock_wrlock(lout);
	} else if (lin < lout) {
		pthread_rwlock_rdlock(lin);
		pthread_rwlock_wrlock(lout);
	} else {
		pthread_rwlock_wrlock(lout);
		pthread_rwlock_rdlock(lin);
	}
	n = ofs_object_copy(&ofs->store, &src->o, (uint64_t)off_in, &dst->o, (uint64_t)off_out, len);
	pthread_rwlock_unlock(lout);
	if (lin != lout)
		pthread_rwlock_unlock(lin);
	if (n < 0)
		fuse_reply_err(req, n == -ENOENT ? EIO : (int)-n); /* a source whose value is lost */
	else
		fuse_reply_write(req, (size_t)n);
}

static void ofs_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
				   struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
				   struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_inode *src = ofs_iget(ofs, ino_in);
	struct ofs_inode *dst = ino_out == ino_in ? src : ofs_iget(ofs, ino_out);

	(void)fi_in; /* the kernel checked it is open for reading */
	ofs_do_copy(req, src, off_in, dst, off_out, fi_out, len, flags);
	if (dst != src)
		ofs_iput(ofs, dst);
	ofs_iput(ofs, src);
}

static void ofs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ofs *ofs = ofs_of(req);
	struct kvb_statfs ks = { 0 };
	struct statvfs st;
	int ret;

	(void)ino;
	ret = kvb_statfs(&ofs->store.kvb, &ks);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	memset(&st, 0, sizeof(st));
	st.f_bsize = ks.block_size;
	st.f_frsize = ks.block_size;
	st.f_blocks = ks.blocks;
	/* Nothing new fits while the metadata's disk is short (ofs_store_meta_low). */
	if (ofs_store_meta_low(&ofs->store))
		ks.blocks_free = 0;
	st.f_bfree = ks.blocks_free;
	st.f_bavail = ks.blocks_free;
	pthread_mutex_lock(&ofs->store.lock);
	st.f_files = ofs->store.nfiles;
	pthread_mutex_unlock(&ofs->store.lock);
	if (ks.files) {
		/* A backend key limit (kv_max_keys): files are what it allows. */
		st.f_files = ks.files;
		st.f_ffree = ks.files_free;
	} else {
		/* Objects are rows, not preallocated inodes: the free count is what the rows allow. */
		st.f_ffree = UINT32_MAX;
		st.f_files += st.f_ffree;
	}
	st.f_favail = st.f_ffree;
	st.f_namemax = META_NAME_MAX;
	fuse_reply_statfs(req, &st);
}

const struct fuse_lowlevel_ops ofs_ll_ops = {
	.init = ofs_op_init,
	.destroy = ofs_op_destroy,
	.lookup = ofs_op_lookup,
	.forget = ofs_op_forget,
	.forget_multi = ofs_op_forget_multi,
	.getattr = ofs_op_getattr,
	.setattr = ofs_op_setattr,
	.mknod = ofs_op_mknod,
	.mkdir = ofs_op_mkdir,
	.symlink = ofs_op_symlink,
	.link = ofs_op_link,
	.unlink = ofs_op_unlink,
	.rmdir = ofs_op_rmdir,
	.rename = ofs_op_rename,
	.open = ofs_op_open,
	.create = ofs_op_create,
	.read = ofs_op_read,
	.write = ofs_op_write,
	.flush = ofs_op_flush,
	.release = ofs_op_release,
	.fsync = ofs_op_fsync,
	.fsyncdir = ofs_op_fsyncdir,
	.fallocate = ofs_op_fallocate,
	.copy_file_range = ofs_op_copy_file_range,
	.readdir = ofs_op_readdir,
	.readdirplus = ofs_op_readdirplus,
	.statfs = ofs_op_statfs,
	.getxattr = ofs_op_getxattr,
	.listxattr = ofs_op_listxattr,
	.setxattr = ofs_op_setxattr,
	.removexattr = ofs_op_removexattr,
};
