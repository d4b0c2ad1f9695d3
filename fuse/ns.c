/*
 * ns.c: the namespace: names and keys, create, mkdir, unlink, rmdir,
 * rename with their directories' times in one metadata transaction
 * (retried once after meta_make_room on a full disk), and readdir.
 * Under store.lock unless said otherwise.
 */
#include "ll.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ofs_check_name(const char *name)
{
	size_t len = strlen(name);

	if (len == 0)
		return -EINVAL;
	if (len > META_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * Whether a name of namelen bytes in dir keeps its key (the path below its
 * tenant) within META_KEY_MAX, with deeper bytes more below it (the path
 * of a directory's deepest descendant).  A tenant's name is no part of its
 * keys.  Under store.lock.
 */
static int ofs_check_key(struct ofs *ofs, uint64_t dir, size_t namelen, size_t deeper)
{
	size_t len = 0;
	int ret;

	if (dir == META_ROOT_INO)
		return 0;
	/* Names are mostly made where the last one was: its key's length is kept. */
	if (dir == ofs->klen_dir && ofs->klen_renames == ofs->dir_renames) {
		len = ofs->klen;
	} else {
		ret = meta_key_len(ofs->store.meta, dir, &len);
		if (ret)
			return ret;
		ofs->klen_dir = dir;
		ofs->klen = len;
		ofs->klen_renames = ofs->dir_renames;
	}
	if ((len ? len + 1 : 0) + namelen + (deeper ? deeper + 1 : 0) > META_KEY_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * An entry of dir was made, removed or renamed: its mtime and ctime become
 * now, in the store and in the table's copy, with the link count the store
 * keeps.  Under store.lock, inside the change's transaction; if that fails,
 * ofs_dir_reload.
 */
static int ofs_dir_changed(struct ofs *ofs, uint64_t dir, int64_t now)
{
	struct ofs_inode *d;
	uint32_t nlink = 0;
	int ret = meta_dir_changed(ofs->store.meta, dir, now, &nlink);

	if (!ret && (d = ofs_ifind(ofs, dir))) {
		d->o.m.mtime = d->o.m.ctime = now;
		d->o.m.nlink = nlink;
	}
	return ret;
}

/*
 * The table's copy of dir's times and link count as the store has them,
 * after a transaction that changed its entries failed.  Under store.lock.
 */
static void ofs_dir_reload(struct ofs *ofs, uint64_t dir)
{
	struct ofs_inode *d = ofs_ifind(ofs, dir);
	struct meta_inode m;

	if (d && meta_get(ofs->store.meta, dir, &m) == 0) {
		d->o.m.mtime = m.mtime;
		d->o.m.ctime = m.ctime;
		d->o.m.nlink = m.nlink;
	}
}

/*
 * The object key of ino: its path below its tenant directory.  Under
 * store.lock.  An unlinked inode has no path; it keeps the key it had.
 */
int ofs_key(struct ofs *ofs, uint64_t ino, char *key, size_t *klen)
{
	return meta_path(ofs->store.meta, ino, 0, key, OFS_KEY_MAX, klen, NULL);
}

/* The tenant directory holding dir (dir itself for a tenant; root for root). */
static int ofs_tenant(struct ofs *ofs, uint64_t dir, uint64_t *tenant)
{
	char name[META_NAME_MAX + 1];
	uint64_t parent;
	size_t len;
	int ret;

	while (dir != META_ROOT_INO) {
		ret = meta_name(ofs->store.meta, dir, &parent, name, &len);
		if (ret)
			return ret;
		if (parent == META_ROOT_INO)
			break;
		dir = parent;
	}
	*tenant = dir;
	return 0;
}

/* Insert a new file or directory under parent.  Under store.lock. */
static int ofs_new_inode(struct ofs *ofs, fuse_req_t req, fuse_ino_t parent, const char *name,
			 mode_t mode, int state, struct meta_inode *m)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct ofs_inode *pdir;
	struct meta_inode dir;
	struct meta *meta = ofs->store.meta;
	int ret = ofs_check_name(name);

	if (!ret)
		ret = ofs_check_key(ofs, parent, strlen(name), 0);
	if (ret)
		return ret;
	/* The kernel holds a lookup on the parent: its attributes are in the table. */
	pdir = ofs_ifind(ofs, parent);
	if (pdir)
		dir = pdir->o.m;
	else if ((ret = meta_get(ofs->store.meta, parent, &dir)))
		return ret;
	if (!S_ISDIR(dir.mode))
		return -ENOTDIR;
	memset(m, 0, sizeof(*m));
	m->parent = parent;
	m->mode = mode;
	m->uid = ctx->uid;
	/* BSD group semantics under a setgid directory, as ext4 does. */
	m->gid = (dir.mode & S_ISGID) ? dir.gid : ctx->gid;
	if (S_ISDIR(mode) && (dir.mode & S_ISGID))
		m->mode |= S_ISGID;
	m->atime = m->mtime = m->ctime = ofs_now();
	m->nlink = S_ISDIR(mode) ? 2 : 1;
	m->bucket = -1;
	m->state = state;
	/* The entry and its directory's times (and link count) in one transaction. */
	ret = meta_begin(meta);
	if (!ret) {
		ret = meta_insert(meta, m, name, strlen(name));
		if (!ret)
			ret = ofs_dir_changed(ofs, parent, m->ctime);
		if (!ret)
			ret = meta_commit(meta);
		else
			meta_rollback(meta);
		if (ret)
			ofs_dir_reload(ofs, parent);
	}
	if (!ret && S_ISREG(mode))
		ofs->store.nfiles++;
	return ret;
}

/* mkdir and mknod: a new committed directory or empty file, one entry reply. */
static void ofs_make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct ofs *ofs = ofs_of(req);
	struct fuse_entry_param e;
	struct meta_inode m;
	int ret;

	pthread_mutex_lock(&ofs->store.lock);
	ret = ofs_new_inode(ofs, req, parent, name, mode, META_COMMITTED, &m);
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

/*
 * The backend's remove_prepare for what dropping parent/name would delete,
 * before the caller takes store.lock to drop it: on ubsio it syncs the
 * journal (on a shared ROOT, a network round trip), which must not stall
 * every other request behind store.lock.  ofs_drop_name prepares again under
 * the lock, which then costs nothing unless the mapping changed or the
 * journal was reset in between.  Harmless when the drop does not happen:
 * a journalled key that a record still names is kept.
 */
static void ofs_prepare_drop(struct ofs *ofs, uint64_t parent, const char *name)
{
	struct kvb_map map = KVB_MAP_EMPTY;
	struct ofs_inode *in;
	struct meta_inode m;

	if (!kvb_has_remove_prepare(&ofs->store.kvb))
		return;
	pthread_mutex_lock(&ofs->store.lock);
	if (meta_lookup(ofs->store.meta, parent, name, strlen(name), &m) == 0 &&
	    S_ISREG(m.mode)) {
		in = ofs_ifind(ofs, m.ino);
		if (!in || in->o.nopen == 0)
			map = ofs_committed(in ? &in->o.m : &m);
	}
	pthread_mutex_unlock(&ofs->store.lock);
	if (map.bucket >= 0)
		(void)kvb_remove_prepare(&ofs->store.kvb, &map); /* errors: again under the lock */
}

/*
 * Drop m's name: detach it while it is open, else delete it and return
 * the storage to free in to_free.  Under store.lock.
 */
int ofs_drop_name(struct ofs *ofs, const struct meta_inode *m, struct kvb_map *to_free)
{
	struct ofs_inode *in = ofs_ifind(ofs, m->ino);
	int ret;

	*to_free = KVB_MAP_EMPTY;
	if (ofs->store.dram_capacity)
		ofs_dram_drop(&ofs->store.dram, m->ino);
	if (in && in->o.nopen > 0) {
		ret = meta_detach(ofs->store.meta, m->ino);
		if (!ret)
			in->o.unlinked = 2;
	} else {
		struct kvb_map map = ofs_committed(in ? &in->o.m : m);

		ret = map.bucket >= 0 ? kvb_remove_prepare(&ofs->store.kvb, &map) : 0;
		if (!ret)
			ret = meta_delete(ofs->store.meta, m->ino);
		if (!ret) {
			*to_free = map;
			if (in)
				in->o.unlinked = 1;
		}
	}
	if (!ret && S_ISREG(m->mode))
		ofs->store.nfiles--;
	return ret;
}

/* Undo the in-memory side of ofs_drop_name when its transaction failed. Under store.lock. */
static void ofs_undrop(struct ofs *ofs, const struct meta_inode *m, struct kvb_map *to_free)
{
	struct ofs_inode *d = ofs_ifind(ofs, m->ino);

	if (d)
		d->o.unlinked = 0;
	if (S_ISREG(m->mode))
		ofs->store.nfiles++;
	*to_free = KVB_MAP_EMPTY;
}

/* unlink and rmdir: drop m's name and change its directory's times, in one transaction. */
static int ofs_drop_entry_once(struct ofs *ofs, const struct meta_inode *m,
			       struct kvb_map *to_free)
{
	struct meta *meta = ofs->store.meta;
	int ret = meta_begin(meta);

	*to_free = KVB_MAP_EMPTY;
	if (ret)
		return ret;
	ret = ofs_drop_name(ofs, m, to_free);
	if (ret) {
		meta_rollback(meta);
	} else {
		ret = ofs_dir_changed(ofs, m->parent, ofs_now());
		if (!ret)
			ret = meta_commit(meta);
		else
			meta_rollback(meta);
		if (ret) {
			ofs_undrop(ofs, m, to_free);
			ofs_dir_reload(ofs, m->parent);
		}
	}
	return ret;
}

/* Drop m's entry, in a transaction with its directory's times.  Under store.lock. */
static int ofs_drop_entry(struct ofs *ofs, const struct meta_inode *m, struct kvb_map *to_free)
{
	int ret, tries = 0;

	/* A delete must work on a full disk: once more after making room. */
	while ((ret = ofs_drop_entry_once(ofs, m, to_free)) == -ENOSPC && !tries++ &&
	       meta_make_room(ofs->store.meta) == 0)
		;
	return ret;
}

void ofs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ofs *ofs = ofs_of(req);
	struct kvb_map to_free = KVB_MAP_EMPTY;
	struct meta_inode m;
	int ret;

	ofs_prepare_drop(ofs, parent, name);
	pthread_mutex_lock(&ofs->store.lock);
	ret = meta_lookup(ofs->store.meta, parent, name, strlen(name), &m);
	if (!ret && S_ISDIR(m.mode))
		ret = -EISDIR;
	if (!ret)
		ret = ofs_drop_entry(ofs, &m, &to_free);
	if (!ret && to_free.bucket >= 0)
		kvb_remove(&ofs->store.kvb, &to_free);
	pthread_mutex_unlock(&ofs->store.lock);
	fuse_reply_err(req, -ret);
}

void ofs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ofs *ofs = ofs_of(req);
	struct kvb_map to_free;
	struct meta_inode m;
	int ret;

	pthread_mutex_lock(&ofs->store.lock);
	ret = meta_lookup(ofs->store.meta, parent, name, strlen(name), &m);
	if (!ret && !S_ISDIR(m.mode))
		ret = -ENOTDIR;
	if (!ret)
		ret = meta_has_children(ofs->store.meta, m.ino);
	if (ret == 1)
		ret = -ENOTEMPTY;
	if (!ret)
		ret = ofs_drop_entry(ofs, &m, &to_free);
	pthread_mutex_unlock(&ofs->store.lock);
	fuse_reply_err(req, -ret);
}

static int ofs_rename_check(struct ofs *ofs, fuse_ino_t parent, fuse_ino_t newparent,
			    const struct meta_inode *src)
{
	uint64_t t1, t2;
	int ret;

	/* The top level holds tenants only: a tenant may be renamed, not moved in or out. */
	if ((parent == META_ROOT_INO) != (newparent == META_ROOT_INO))
		return S_ISDIR(src->mode) || parent == META_ROOT_INO ? -EXDEV : -EPERM;
	if (parent == newparent)
		return 0;
	ret = ofs_tenant(ofs, parent, &t1);
	if (!ret)
		ret = ofs_tenant(ofs, newparent, &t2);
	if (!ret && t1 != t2)
		ret = -EXDEV;
	return ret;
}

/*
 * A rename must leave every key it moves within META_KEY_MAX: src's own,
 * and for a directory those of its descendants, which it lengthens by as
 * much as its own (walked only then).  Under store.lock.
 */
static int ofs_rename_key_check(struct ofs *ofs, fuse_ino_t newparent, const char *newname,
				const struct meta_inode *src)
{
	size_t old = 0, now = 0, deeper = 0;
	int ret = ofs_check_key(ofs, newparent, strlen(newname), 0);

	if (ret || !S_ISDIR(src->mode) || newparent == META_ROOT_INO)
		return ret;
	ret = meta_key_len(ofs->store.meta, src->ino, &old);
	if (ret == -ENAMETOOLONG)
		ret = 0; /* already too long (an older store): check where it goes */
	if (!ret)
		ret = meta_key_len(ofs->store.meta, newparent, &now);
	if (ret)
		return ret;
	now = (now ? now + 1 : 0) + strlen(newname);
	if (now <= old)
		return 0;
	ret = meta_subtree_depth(ofs->store.meta, src->ino, &deeper);
	return ret ? ret : ofs_check_key(ofs, newparent, strlen(newname), deeper);
}

void ofs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
			  fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct ofs *ofs = ofs_of(req);
	struct meta *meta = ofs->store.meta;
	struct kvb_map to_free = KVB_MAP_EMPTY;
	struct meta_inode src, dst;
	struct ofs_inode *in;
	int64_t now = ofs_now();
	int ret, have_dst = 0, tries = 0;

	if (flags & ~(unsigned)RENAME_NOREPLACE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	ret = ofs_check_name(newname);
	/* The target a rename replaces, prepared outside store.lock as unlink's. */
	if (!ret && !(flags & RENAME_NOREPLACE))
		ofs_prepare_drop(ofs, newparent, newname);
	pthread_mutex_lock(&ofs->store.lock);
	if (!ret)
		ret = meta_lookup(meta, parent, name, strlen(name), &src);
	if (!ret)
		ret = ofs_rename_check(ofs, parent, newparent, &src);
	if (!ret)
		ret = ofs_rename_key_check(ofs, newparent, newname, &src);
	if (!ret) {
		ret = meta_lookup(meta, newparent, newname, strlen(newname), &dst);
		if (ret == -ENOENT) {
			ret = 0;
		} else if (!ret) {
			have_dst = 1;
			if (flags & RENAME_NOREPLACE)
				ret = -EEXIST;
			else if (dst.ino == src.ino)
				goto out; /* the same file: nothing to do */
			else if (S_ISDIR(dst.mode) && !S_ISDIR(src.mode))
				ret = -EISDIR;
			else if (!S_ISDIR(dst.mode) && S_ISDIR(src.mode))
				ret = -ENOTDIR;
			else if (S_ISDIR(dst.mode))
				ret = meta_has_children(meta, dst.ino) ? -ENOTEMPTY : 0;
		}
	}
	/*
	 * Replacing the target and moving the source is one transaction; on a
	 * full disk, once more after making room (a rename must work there).
	 */
again:
	if (!ret)
		ret = meta_begin(meta);
	if (!ret) {
		if (have_dst)
			ret = ofs_drop_name(ofs, &dst, &to_free);
		if (!ret)
			ret = meta_move(meta, src.ino, newparent, newname, strlen(newname));
		if (!ret)
			ret = ofs_dir_changed(ofs, parent, now);
		if (!ret && newparent != parent)
			ret = ofs_dir_changed(ofs, newparent, now);
		if (!ret)
			ret = meta_commit(meta);
		else
			meta_rollback(meta);
		if (ret && have_dst)
			ofs_undrop(ofs, &dst, &to_free);
		if (ret) {
			ofs_dir_reload(ofs, parent);
			ofs_dir_reload(ofs, newparent);
		}
		if (ret == -ENOSPC && !tries++ && meta_make_room(meta) == 0) {
			ret = 0;
			goto again;
		}
	}
	if (!ret) {
		in = ofs_ifind(ofs, src.ino);
		if (in) {
			in->o.m.parent = newparent;
			in->o.m.ctime = now;
		}
		if (S_ISDIR(src.mode))
			ofs->dir_renames++; /* the keys below it changed length */
		if (to_free.bucket >= 0)
			kvb_remove(&ofs->store.kvb, &to_free);
	}
out:
	pthread_mutex_unlock(&ofs->store.lock);
	fuse_reply_err(req, -ret);
}

/*
 * A create that failed after its entry was made, or whose caller was gone
 * before the reply, takes the entry back: a failed create leaves no name.
 * Not once another opener committed content to it.  Under store.lock.
 */
static void ofs_unmake(struct ofs *ofs, uint64_t ino)
{
	struct kvb_map to_free;
	struct meta_inode m;
	int ret;

	if (meta_get(ofs->store.meta, ino, &m) || !m.parent || m.state != META_NEW)
		return;
	ret = ofs_drop_entry(ofs, &m, &to_free);
	if (ret)
		ofs_log("inode %llu: cannot remove the entry of a failed create: %s (dropped at "
			"the next mount)", (unsigned long long)ino, strerror(-ret));
	else if (to_free.bucket >= 0)
		kvb_remove(&ofs->store.kvb, &to_free);
}

void ofs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			  struct fuse_file_info *fi)
{
	struct ofs *ofs = ofs_of(req);
	struct fuse_entry_param e;
	struct ofs_inode *in = NULL;
	struct meta_inode m;
	int ret;

	if (parent == META_ROOT_INO) {
		fuse_reply_err(req, EPERM); /* the top level holds tenant directories only */
		return;
	}
	if (!S_ISREG(mode)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (ofs_store_meta_low(&ofs->store)) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	pthread_mutex_lock(&ofs->store.lock);
	/* Never committed until its first close or fsync: recovery drops it. */
	ret = ofs_new_inode(ofs, req, parent, name, S_IFREG | (mode & 07777), META_NEW, &m);
	if (!ret) {
		ret = ofs_entry(ofs, &m, &e);
		if (ret)
			ofs_unmake(ofs, m.ino);
	}
	if (!ret) {
		in = ofs_ifind(ofs, m.ino);
		in->kfresh = 0; /* its writer's bytes go through the kernel's cache */
		in->o.nopen++;
	}
	pthread_mutex_unlock(&ofs->store.lock);
	if (!ret) {
		ret = ofs_object_open_writer(&ofs->store, &in->o, 0);
		if (ret) {
			pthread_mutex_lock(&ofs->store.lock);
			in->o.nopen--;
			ofs_unmake(ofs, m.ino);
			in->nlookup--;
			ofs_isettle(ofs, in);
			pthread_mutex_unlock(&ofs->store.lock);
		}
	}
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	fi->fh = 1;
	fi->keep_cache = 1;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		/* The creator was interrupted: the kernel has neither the entry nor the file. */
		pthread_rwlock_wrlock(ofs_rw(ofs, in));
		if (--in->o.nwriters == 0)
			ofs_object_close(&ofs->store, &in->o);
		pthread_rwlock_unlock(ofs_rw(ofs, in));
		pthread_mutex_lock(&ofs->store.lock);
		in->o.nopen--;
		ofs_unmake(ofs, m.ino);
		in->nlookup--;
		ofs_isettle(ofs, in);
		pthread_mutex_unlock(&ofs->store.lock);
	}
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
