/*
 * ns.c: namespace transactions (see ns.h).  Under s->lock unless said
 * otherwise.
 */
#include "ns.h"
#include "extent.h"
#include "store_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int ofs_ns_check_name(const char *name)
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
 * keys.
 */
static int ns_check_key(struct ofs_store *s, uint64_t dir, size_t namelen, size_t deeper)
{
	size_t len = 0;
	int ret;

	if (dir == META_ROOT_INO)
		return 0;
	/* Names are mostly made where the last one was: its key's length is kept. */
	if (dir == s->klen_dir && s->klen_renames == s->dir_renames) {
		len = s->klen;
	} else {
		ret = meta_key_len(s->meta, dir, &len);
		if (ret)
			return ret;
		s->klen_dir = dir;
		s->klen = len;
		s->klen_renames = s->dir_renames;
	}
	if ((len ? len + 1 : 0) + namelen + (deeper ? deeper + 1 : 0) > META_KEY_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * An entry of dir was made, removed or renamed: its mtime and ctime become
 * now, in the store and in memory, with the link count the store keeps,
 * read again only when the entry is a directory (subdir): a file's entry
 * leaves it as it was.  Inside the change's transaction; if that fails,
 * ns_dir_reload.
 */
static int ns_dir_changed(struct ofs_store *s, uint64_t dir, int64_t now, int subdir)
{
	struct ofs_object *d = ofs_object_find(s, dir);
	uint32_t nlink = 0;
	int ret = meta_dir_changed(s->meta, dir, now, d && subdir ? &nlink : NULL);

	if (!ret && d) {
		d->m.mtime = d->m.ctime = now;
		if (subdir)
			d->m.nlink = nlink;
	}
	return ret;
}

/* dir's times and link count in memory as the store has them, after a failed transaction. */
static void ns_dir_reload(struct ofs_store *s, uint64_t dir)
{
	struct ofs_object *d = ofs_object_find(s, dir);
	struct meta_inode m;

	if (d && meta_get(s->meta, dir, &m) == 0) {
		d->m.mtime = m.mtime;
		d->m.ctime = m.ctime;
		d->m.nlink = m.nlink;
	}
}

/* The tenant directory holding dir (dir itself for a tenant; root for root). */
static int ns_tenant(struct ofs_store *s, uint64_t dir, uint64_t *tenant)
{
	char name[META_NAME_MAX + 1];
	uint64_t parent;
	size_t len;
	int ret;

	while (dir != META_ROOT_INO) {
		ret = meta_name(s->meta, dir, &parent, name, &len);
		if (ret)
			return ret;
		if (parent == META_ROOT_INO)
			break;
		dir = parent;
	}
	*tenant = dir;
	return 0;
}

int ofs_ns_make(struct ofs_store *s, uint64_t parent, const char *name, mode_t mode, uid_t uid,
		gid_t gid, int state, struct meta_inode *m)
{
	struct ofs_object *pdir;
	struct meta_inode dir;
	int ret = ofs_ns_check_name(name);

	if (!ret)
		ret = ns_check_key(s, parent, strlen(name), 0);
	if (ret)
		return ret;
	/* The kernel holds a lookup on the parent: its attributes are in memory. */
	pdir = ofs_object_find(s, parent);
	if (pdir)
		dir = pdir->m;
	else if ((ret = meta_get(s->meta, parent, &dir)))
		return ret;
	if (!S_ISDIR(dir.mode))
		return -ENOTDIR;
	memset(m, 0, sizeof(*m));
	m->parent = parent;
	m->mode = mode;
	m->uid = uid;
	/* BSD group semantics under a setgid directory, as ext4 does. */
	m->gid = (dir.mode & S_ISGID) ? dir.gid : gid;
	if (S_ISDIR(mode) && (dir.mode & S_ISGID))
		m->mode |= S_ISGID;
	m->atime = m->mtime = m->ctime = ofs_now();
	m->nlink = S_ISDIR(mode) ? 2 : 1;
	m->bucket = -1;
	m->state = state;
	/* The entry and its directory's times (and link count) in one transaction. */
	ret = meta_begin(s->meta);
	if (!ret) {
		ret = meta_insert(s->meta, m, name, strlen(name));
		if (!ret)
			ret = ns_dir_changed(s, parent, m->ctime, S_ISDIR(mode));
		if (!ret)
			ret = meta_commit(s->meta);
		else
			meta_rollback(s->meta);
		if (ret)
			ns_dir_reload(s, parent);
	}
	if (!ret && S_ISREG(mode))
		s->nfiles++;
	return ret;
}

/*
 * The backend's remove_prepare for what dropping parent/name would delete,
 * before s->lock is taken to drop it: on ubsio it syncs the journal (on a
 * shared ROOT, a network round trip), which must not stall every other
 * request behind s->lock.  ns_drop_name prepares again under the lock,
 * which then costs nothing unless the mapping changed or the journal was
 * reset in between.  Harmless when the drop does not happen: a journalled
 * key that a record still names is kept.  Takes s->lock.
 */
static void ns_prepare_drop(struct ofs_store *s, uint64_t parent, const char *name, size_t len)
{
	struct kvb_map map = KVB_MAP_EMPTY;
	struct ofs_object *o;
	struct meta_inode m;

	if (!kvb_has_remove_prepare(&s->kvb))
		return;
	pthread_mutex_lock(&s->lock);
	if (meta_lookup(s->meta, parent, name, len, &m) == 0 && S_ISREG(m.mode)) {
		o = ofs_object_find(s, m.ino);
		if (!o || o->nopen == 0)
			map = ofs_committed(o ? &o->m : &m);
	}
	pthread_mutex_unlock(&s->lock);
	if (map.bucket >= 0)
		(void)kvb_remove_prepare(&s->kvb, &map); /* errors: again under the lock */
}

/*
 * Drop m's name: detach it while it is open, else delete it and return
 * the storage to free (after the transaction) in to_free.
 */
static int ns_drop_name(struct ofs_store *s, const struct meta_inode *m, struct kvb_map *to_free)
{
	struct ofs_object *o = ofs_object_find(s, m->ino);
	int ret;

	*to_free = KVB_MAP_EMPTY;
	if (s->dram_capacity)
		ofs_dram_drop(&s->dram, m->ino);
	if (o && o->nopen > 0) {
		ret = meta_detach(s->meta, m->ino);
		if (!ret)
			o->unlinked = 2;
	} else {
		struct kvb_map map = ofs_committed(o ? &o->m : m);

		if (map.bucket == META_EXTENTS)
			ret = ofs_extents_take(s, m->ino, &map);
		else
			ret = map.bucket >= 0 ? kvb_remove_prepare(&s->kvb, &map) : 0;
		if (!ret)
			ret = meta_delete(s->meta, m->ino);
		if (!ret) {
			*to_free = map;
			if (o)
				o->unlinked = 1;
		} else {
			ofs_extents_untake(s, &map);
		}
	}
	if (!ret && S_ISREG(m->mode))
		s->nfiles--;
	if (!ret)
		ofs_epochs_bump(s, m->ino);
	return ret;
}

/* Undo the in-memory side of ns_drop_name when its transaction failed. */
static void ns_undrop(struct ofs_store *s, const struct meta_inode *m, struct kvb_map *to_free)
{
	struct ofs_object *o = ofs_object_find(s, m->ino);

	if (o)
		o->unlinked = 0;
	if (S_ISREG(m->mode))
		s->nfiles++;
	ofs_extents_untake(s, to_free);
	*to_free = KVB_MAP_EMPTY;
}

/* Drop m's name and change its directory's times, in one transaction. */
static int ns_drop_entry_once(struct ofs_store *s, const struct meta_inode *m,
			      struct kvb_map *to_free)
{
	int ret = meta_begin(s->meta);

	*to_free = KVB_MAP_EMPTY;
	if (ret)
		return ret;
	ret = ns_drop_name(s, m, to_free);
	if (ret) {
		meta_rollback(s->meta);
	} else {
		ret = ns_dir_changed(s, m->parent, ofs_now(), S_ISDIR(m->mode));
		if (!ret)
			ret = meta_commit(s->meta);
		else
			meta_rollback(s->meta);
		if (ret) {
			ns_undrop(s, m, to_free);
			ns_dir_reload(s, m->parent);
		}
	}
	return ret;
}

/* Drop m's entry, in a transaction with its directory's times. */
static int ns_drop_entry(struct ofs_store *s, const struct meta_inode *m, struct kvb_map *to_free)
{
	int ret, tries = 0;

	/* A delete must work on a full disk: once more after making room. */
	while ((ret = ns_drop_entry_once(s, m, to_free)) == -ENOSPC && !tries++ &&
	       meta_make_room(s->meta) == 0)
		;
	return ret;
}

int ofs_ns_drop(struct ofs_store *s, const struct meta_inode *m)
{
	struct kvb_map to_free;
	int ret = ns_drop_name(s, m, &to_free);

	if (!ret && to_free.bucket != -1)
		ofs_store_remove(s, &to_free);
	return ret;
}

void ofs_ns_unmake(struct ofs_store *s, uint64_t ino)
{
	struct kvb_map to_free;
	struct meta_inode m;
	int ret;

	if (meta_get(s->meta, ino, &m) || !m.parent || m.state != META_NEW)
		return;
	ret = ns_drop_entry(s, &m, &to_free);
	if (ret)
		ofs_log("inode %llu: cannot remove the entry of a failed create: %s (dropped at "
			"the next mount)", (unsigned long long)ino, strerror(-ret));
	else if (to_free.bucket != -1)
		ofs_store_remove(s, &to_free);
}

/* unlink(2) of one name, in a transaction of its own.  Under s->lock. */
static int ns_unlink_one(struct ofs_store *s, uint64_t parent, const char *name, size_t len)
{
	struct kvb_map to_free = KVB_MAP_EMPTY;
	struct meta_inode m;
	int ret = meta_lookup(s->meta, parent, name, len, &m);

	if (!ret && S_ISDIR(m.mode))
		ret = -EISDIR;
	if (!ret)
		ret = ns_drop_entry(s, &m, &to_free);
	if (!ret && to_free.bucket != -1)
		ofs_store_remove(s, &to_free);
	return ret;
}

int ofs_ns_unlink(struct ofs_store *s, uint64_t parent, const char *name)
{
	size_t len = strlen(name);
	int ret;

	ns_prepare_drop(s, parent, name, len);
	pthread_mutex_lock(&s->lock);
	ret = ns_unlink_one(s, parent, name, len);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int ofs_ns_unlink_many(struct ofs_store *s, const uint64_t *parents, const char *const *names,
		       const size_t *lens, size_t n, int *errs)
{
	struct kvb_map *to_free = calloc(n + 1, sizeof(*to_free));
	struct meta_inode *m = calloc(n + 1, sizeof(*m));
	char *todo = calloc(n + 1, 1);
	int64_t now = ofs_now();
	uint64_t last_dir = 0;
	size_t i;
	int ret;

	if (!to_free || !m || !todo) {
		free(to_free);
		free(m);
		free(todo);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		todo[i] = errs[i] == 0;
		to_free[i] = KVB_MAP_EMPTY;
		if (todo[i])
			ns_prepare_drop(s, parents[i], names[i], lens[i]);
	}
	pthread_mutex_lock(&s->lock);
	ret = meta_begin(s->meta);
	for (i = 0; !ret && i < n; i++) {
		if (!todo[i])
			continue;
		/* A name met twice is gone by its second time: ENOENT, as a second unlink. */
		errs[i] = meta_lookup(s->meta, parents[i], names[i], lens[i], &m[i]);
		if (errs[i] && errs[i] != -ENOENT) {
			/* sqlite may have rolled the transaction back: each name on its own. */
			ret = errs[i];
			m[i].ino = 0;
			break;
		}
		if (!errs[i] && S_ISDIR(m[i].mode))
			errs[i] = -EISDIR;
		if (errs[i]) {
			m[i].ino = 0; /* changed nothing */
			continue;
		}
		ret = ns_drop_name(s, &m[i], &to_free[i]);
		if (ret) {
			m[i].ino = 0;
			break;
		}
		/* Keys of a batch usually share a directory: its times once per run of them. */
		if (parents[i] != last_dir)
			ret = ns_dir_changed(s, parents[i], now, 0); /* files only: no link count */
		last_dir = parents[i];
	}
	if (!ret)
		ret = meta_commit(s->meta);
	else
		meta_rollback(s->meta);
	if (!ret) {
		for (i = 0; i < n; i++)
			if (m[i].ino && to_free[i].bucket != -1)
				ofs_store_remove(s, &to_free[i]);
	} else {
		/*
		 * Nothing of the transaction happened: memory as the records
		 * say, then every name on its own, each with its own result
		 * (on a full metadata disk, a delete makes room there).
		 */
		for (i = 0; i < n; i++) {
			if (!m[i].ino)
				continue;
			ns_undrop(s, &m[i], &to_free[i]);
			ns_dir_reload(s, m[i].parent);
		}
		for (i = 0; i < n; i++)
			if (todo[i])
				errs[i] = ns_unlink_one(s, parents[i], names[i], lens[i]);
	}
	pthread_mutex_unlock(&s->lock);
	free(to_free);
	free(m);
	free(todo);
	return 0;
}

int ofs_ns_rmdir(struct ofs_store *s, uint64_t parent, const char *name)
{
	struct kvb_map to_free;
	struct meta_inode m;
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = meta_lookup(s->meta, parent, name, strlen(name), &m);
	if (!ret && !S_ISDIR(m.mode))
		ret = -ENOTDIR;
	if (!ret)
		ret = meta_has_children(s->meta, m.ino);
	if (ret == 1)
		ret = -ENOTEMPTY;
	if (!ret)
		ret = ns_drop_entry(s, &m, &to_free);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

static int ns_rename_check(struct ofs_store *s, uint64_t parent, uint64_t newparent,
			   const struct meta_inode *src)
{
	uint64_t t1, t2;
	int ret;

	/* The top level holds tenants only: a tenant may be renamed, not moved in or out. */
	if ((parent == META_ROOT_INO) != (newparent == META_ROOT_INO))
		return S_ISDIR(src->mode) || parent == META_ROOT_INO ? -EXDEV : -EPERM;
	if (parent == newparent)
		return 0;
	ret = ns_tenant(s, parent, &t1);
	if (!ret)
		ret = ns_tenant(s, newparent, &t2);
	if (!ret && t1 != t2)
		ret = -EXDEV;
	return ret;
}

/*
 * A rename must leave every key it moves within META_KEY_MAX: src's own,
 * and for a directory those of its descendants, which it lengthens by as
 * much as its own (walked only then).
 */
static int ns_rename_key_check(struct ofs_store *s, uint64_t newparent, const char *newname,
			       const struct meta_inode *src)
{
	size_t old = 0, now = 0, deeper = 0;
	int ret = ns_check_key(s, newparent, strlen(newname), 0);

	if (ret || !S_ISDIR(src->mode) || newparent == META_ROOT_INO)
		return ret;
	ret = meta_key_len(s->meta, src->ino, &old);
	if (ret == -ENAMETOOLONG)
		ret = 0; /* already too long (an older store): check where it goes */
	if (!ret)
		ret = meta_key_len(s->meta, newparent, &now);
	if (ret)
		return ret;
	now = (now ? now + 1 : 0) + strlen(newname);
	if (now <= old)
		return 0;
	ret = meta_subtree_depth(s->meta, src->ino, &deeper);
	return ret ? ret : ns_check_key(s, newparent, strlen(newname), deeper);
}

int ofs_ns_rename(struct ofs_store *s, uint64_t parent, const char *name, uint64_t newparent,
		  const char *newname, unsigned flags)
{
	struct meta *meta = s->meta;
	struct kvb_map to_free = KVB_MAP_EMPTY;
	struct meta_inode src, dst;
	struct ofs_object *o;
	int64_t now = ofs_now();
	int ret, have_dst = 0, tries = 0;

	if (flags & ~(unsigned)RENAME_NOREPLACE)
		return -EINVAL;
	ret = ofs_ns_check_name(newname);
	/* The target a rename replaces, prepared outside s->lock as unlink's. */
	if (!ret && !(flags & RENAME_NOREPLACE))
		ns_prepare_drop(s, newparent, newname, strlen(newname));
	pthread_mutex_lock(&s->lock);
	if (!ret)
		ret = meta_lookup(meta, parent, name, strlen(name), &src);
	if (!ret)
		ret = ns_rename_check(s, parent, newparent, &src);
	if (!ret)
		ret = ns_rename_key_check(s, newparent, newname, &src);
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
			ret = ns_drop_name(s, &dst, &to_free);
		if (!ret)
			ret = meta_move(meta, src.ino, newparent, newname, strlen(newname));
		if (!ret)
			ret = ns_dir_changed(s, parent, now, S_ISDIR(src.mode));
		if (!ret && newparent != parent)
			ret = ns_dir_changed(s, newparent, now, S_ISDIR(src.mode));
		if (!ret)
			ret = meta_commit(meta);
		else
			meta_rollback(meta);
		if (ret && have_dst)
			ns_undrop(s, &dst, &to_free);
		if (ret) {
			ns_dir_reload(s, parent);
			ns_dir_reload(s, newparent);
		}
		if (ret == -ENOSPC && !tries++ && meta_make_room(meta) == 0) {
			ret = 0;
			goto again;
		}
	}
	if (!ret) {
		o = ofs_object_find(s, src.ino);
		if (o) {
			o->m.parent = newparent;
			o->m.ctime = now;
		}
		/* Descriptors kept by batch clients name it by its old key. */
		ofs_epochs_bump(s, src.ino);
		if (S_ISDIR(src.mode)) {
			s->dir_renames++; /* the keys below it changed length */
			ofs_epochs_bump_all(s);
		}
		if (to_free.bucket != -1)
			ofs_store_remove(s, &to_free);
	}
out:
	pthread_mutex_unlock(&s->lock);
	return ret;
}
