/*
 * ns.c: the namespace as the kernel asks for it: mkdir, mknod, create,
 * unlink, rmdir, rename (store/ns.c's transactions), and readdir.
 */
#include "ll.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* mkdir and mknod: a new committed directory or empty file, one entry reply. */
static void ofs_make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct ofs *ofs = ofs_of(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fuse_entry_param e;
	struct meta_inode m;
	int ret;

	pthread_mutex_lock(&ofs->store.lock);
	ret = ofs_ns_make(&ofs->store, parent, name, mode, ctx->uid, ctx->gid, META_COMMITTED, &m);
	if (!ret)
		ret = ofs_entry(ofs, &m, &e);
	pthread_mutex_unlock(&ofs->store.lock);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_entry(req, &e);
}

void ofs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	ofs_make(req, parent, name, S_IFDIR | (mode & 07777));
}

void ofs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			 dev_t rdev)
{
	(void)rdev;
	/* Objects are regular files; device nodes, fifos and sockets have no place here. */
	if (!S_ISREG(mode) || parent == META_ROOT_INO) {
		fuse_reply_err(req, EPERM);
		return;
	}
	ofs_make(req, parent, name, S_IFREG | (mode & 07777));
}

void ofs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link;
	(void)parent;
	(void)name;
	fuse_reply_err(req, EPERM);
}

void ofs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
	(void)ino;
	(void)parent;
	(void)name;
	fuse_reply_err(req, EPERM);
}

void ofs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -ofs_ns_unlink(&ofs_of(req)->store, parent, name));
}

void ofs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -ofs_ns_rmdir(&ofs_of(req)->store, parent, name));
}

void ofs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		   const char *newname, unsigned int flags)
{
	fuse_reply_err(req, -ofs_ns_rename(&ofs_of(req)->store, parent, name, newparent, newname,
					   flags));
}

/*
 * Take back a create whose writer could not open, or whose creator was
 * gone before the reply: the open, the entry and the kernel's lookup.
 */
static void ofs_create_undo(struct ofs *ofs, struct ofs_inode *in, int writer, int direct)
{
	if (writer) {
		pthread_rwlock_wrlock(ofs_rw(ofs, in));
		if (ofs_writer_gone(&in->o))
			ofs_object_close(&ofs->store, &in->o);
		pthread_rwlock_unlock(ofs_rw(ofs, in));
	}
	pthread_mutex_lock(&ofs->store.lock);
	assert(in->o.nopen > 0 && in->nlookup > 0);
	ofs_direct_close(in, direct);
	in->o.nopen--;
	ofs_ns_unmake(&ofs->store, in->o.m.ino);
	in->nlookup--;
	ofs_isettle(ofs, in);
	pthread_mutex_unlock(&ofs->store.lock);
}

/* A new file, looked up, open and with a working state: *e and *inp. */
static int ofs_create_inode(struct ofs *ofs, fuse_req_t req, fuse_ino_t parent, const char *name,
			    mode_t mode, int direct, struct fuse_entry_param *e,
			    struct ofs_inode **inp)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct ofs_inode *in = NULL;
	struct meta_inode m;
	int ret;

	pthread_mutex_lock(&ofs->store.lock);
	/* Never committed until its first close or fsync: recovery drops it. */
	ret = ofs_evict_quota_check(&ofs->store, parent);
	if (!ret)
		ret = ofs_ns_make(&ofs->store, parent, name, S_IFREG | (mode & 07777), ctx->uid,
				  ctx->gid, META_NEW, &m);
	if (!ret) {
		ret = ofs_entry(ofs, &m, e);
		if (ret)
			ofs_ns_unmake(&ofs->store, m.ino);
	}
	if (!ret) {
		in = ofs_ifind(ofs, m.ino);
		/* A direct writer's bytes bypass the kernel's cache; else they fill it. */
		in->kfresh = direct ? 3 : 0;
		in->ndirect += direct;
		in->o.nopen++;
	}
	pthread_mutex_unlock(&ofs->store.lock);
	if (!ret) {
		ret = ofs_object_open_writer(&ofs->store, &in->o, 0);
		if (ret)
			ofs_create_undo(ofs, in, 0, direct);
	}
	*inp = in;
	return ret;
}

void ofs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		   struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct fuse_entry_param e;
	struct ofs_inode *in;
	/*
	 * A write-only create (how KV blocks are put) writes around the
	 * kernel's cache: no GETXATTR of security.capability before each
	 * WRITE (file_remove_privs: this mount cannot set SB_NOSEC without
	 * killpriv_v2), no copy into pages nobody reads yet, and the first
	 * reader's open fills them at once (kfresh).  Nothing can map a
	 * write-only handle, so its mappings need no cache; set-id files keep
	 * the kernel's path, which clears those bits on a write.
	 */
	int direct = (fi->flags & O_ACCMODE) == O_WRONLY && !(mode & (S_ISUID | S_ISGID));
	int ret;

	/* The top level holds tenant directories only; objects are regular files. */
	if (parent == META_ROOT_INO || !S_ISREG(mode))
		ret = -EPERM;
	else if (ofs_store_meta_low(&ofs->store))
		ret = -ENOSPC;
	else
		ret = ofs_create_inode(ofs, req, parent, name, mode, direct, &e, &in);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	fi->fh = OFS_FH_WRITER | (direct ? OFS_FH_DIRECT : 0);
	fi->direct_io = direct;
	fi->keep_cache = 1;
	if (fuse_reply_create(req, &e, fi) == -ENOENT)
		ofs_create_undo(ofs, in, 1, direct); /* the kernel has neither the entry nor the file */
}

struct ofs_dirbuf {
	fuse_req_t req;
	struct ofs *ofs;
	char *buf;
	size_t size, used;
	int plus; /* readdirplus: each entry with its attributes, counted as a lookup */
};

/*
 * Add an entry: 1 when the buffer is full (the entry is not added), 0, or
 * -errno.  m: the entry's inode, NULL for "." and "..", which readdirplus
 * sends without attributes (the kernel neither counts nor caches them).
 * Under store.lock.
 */
static int ofs_dirbuf_add(struct ofs_dirbuf *d, const char *name, const struct meta_inode *m,
			  uint64_t ino, mode_t mode, off_t next)
{
	size_t room = d->size - d->used, n;

	if (d->plus) {
		struct fuse_entry_param e;
		int ret;

		memset(&e, 0, sizeof(e));
		e.attr.st_ino = ino;
		e.attr.st_mode = mode;
		/* The lookup is counted only for an entry that fits. */
		if (fuse_add_direntry_plus(d->req, NULL, 0, name, &e, next) > room)
			return 1;
		if (m && (ret = ofs_entry(d->ofs, m, &e)))
			return ret;
		n = fuse_add_direntry_plus(d->req, d->buf + d->used, room, name, &e, next);
	} else {
		struct stat st = { .st_ino = ino, .st_mode = mode };

		n = fuse_add_direntry(d->req, d->buf + d->used, room, name, &st, next);
	}
	if (n > room)
		return 1;
	d->used += n;
	return 0;
}

static int ofs_readdir_one(void *ctx, const struct meta_inode *in, const char *name, size_t len)
{
	char z[META_NAME_MAX + 1];

	if (len > META_NAME_MAX)
		return 0;
	memcpy(z, name, len);
	z[len] = '\0';
	/* The offset of an entry is its ino + 2: stable while entries come and go. */
	return ofs_dirbuf_add(ctx, z, in, in->ino, in->mode, (off_t)(in->ino + 2));
}

static void ofs_do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	struct ofs *ofs = ofs_of(req);
	struct ofs_dirbuf d = { .req = req, .ofs = ofs, .size = size, .plus = plus };
	struct meta_inode dir;
	int ret;

	d.buf = malloc(size);
	if (!d.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&ofs->store.lock);
	ret = meta_get(ofs->store.meta, ino, &dir);
	if (!ret && !S_ISDIR(dir.mode))
		ret = -ENOTDIR;
	if (!ret && off < 1)
		ret = ofs_dirbuf_add(&d, ".", NULL, ino, S_IFDIR, 1);
	if (!ret && off < 2)
		ret = ofs_dirbuf_add(&d, "..", NULL, dir.parent ? dir.parent : ino, S_IFDIR, 2);
	if (!ret)
		ret = meta_readdir(ofs->store.meta, ino, off < 2 ? 0 : (uint64_t)off - 2,
				   ofs_readdir_one, &d);
	if (ret == 1)
		ret = 0; /* the buffer is full */
	else if (ret < 0 && d.used > 0 && plus)
		ret = 0; /* the entries in it are counted as looked up: send them */
	pthread_mutex_unlock(&ofs->store.lock);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_buf(req, d.buf, d.used);
	free(d.buf);
}

void ofs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	ofs_do_readdir(req, ino, size, off, 0);
}

/* With the attributes: `ls -l` of a tenant takes no LOOKUP per key. */
void ofs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			       struct fuse_file_info *fi)
{
	(void)fi;
	ofs_do_readdir(req, ino, size, off, 1);
}
