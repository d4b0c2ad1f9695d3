/*
 * inode.c: the inodes the kernel knows or has open: each embeds the
 * store's object and sits in the store's object table (ofs_object_find).
 * A request's hold on one, the kernel's lookup counts, and the attributes
 * and entries replied for them.  Under store.lock but for the fields
 * annotated otherwise (ofs.h, object.h).
 */
#include "ofs.h"
#include "extent.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The inode embedding o. */
static struct ofs_inode *ofs_inode_of(struct ofs_object *o)
{
	return o ? (struct ofs_inode *)(void *)((char *)o - offsetof(struct ofs_inode, o)) : NULL;
}

struct ofs_inode *ofs_ifind(struct ofs *ofs, uint64_t ino)
{
	return ofs_inode_of(ofs_object_find(&ofs->store, ino));
}

/* The table's inode for m->ino, created from m when absent. */
static struct ofs_inode *ofs_iget_from(struct ofs *ofs, const struct meta_inode *m)
{
	struct ofs_inode *in = ofs_ifind(ofs, m->ino);

	if (in)
		return in;
	in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	in->o.m = *m;
	if (ofs_object_insert(&ofs->store, &in->o)) {
		free(in);
		return NULL;
	}
	return in;
}

static void ofs_ifree(struct ofs_inode *in)
{
	free(in->o.pcs);
	ofs_extents_free(in->o.x);
	free(in);
}

int ofs_table_init(struct ofs *ofs)
{
	struct meta_inode root;
	struct ofs_inode *in;

	if (meta_get(ofs->store.meta, META_ROOT_INO, &root))
		return -ENOMEM;
	in = ofs_iget_from(ofs, &root);
	if (!in)
		return -ENOMEM;
	in->nlookup = 1;
	return 0;
}

void ofs_table_release(struct ofs *ofs)
{
	struct ofs_object *o;

	pthread_mutex_lock(&ofs->store.lock);
	while ((o = ofs_object_pop(&ofs->store))) {
		if (o->obj) {
			pthread_mutex_unlock(&ofs->store.lock);
			ofs_object_close(&ofs->store, o);
			pthread_mutex_lock(&ofs->store.lock);
		}
		o->nopen = 0;
		ofs_object_settle(&ofs->store, o);
		ofs_ifree(ofs_inode_of(o));
	}
	pthread_mutex_unlock(&ofs->store.lock);
}

/*
 * The inode of a request, held (busy) until ofs_iput: the kernel may release
 * and forget an inode as soon as a reply is sent, so the struct must outlive
 * the request that is using it, whatever order the requests arrive in.
 */
struct ofs_inode *ofs_iget(struct ofs *ofs, fuse_ino_t ino)
{
	struct ofs_inode *in;

	pthread_mutex_lock(&ofs->store.lock);
	in = ofs_ifind(ofs, ino);
	if (in)
		in->busy++;
	pthread_mutex_unlock(&ofs->store.lock);
	return in;
}

/*
 * Free what an unlinked inode still holds once nothing has it open, and
 * forget it once the kernel does too.  Under store.lock.
 */
void ofs_isettle(struct ofs *ofs, struct ofs_inode *in)
{
	ofs_object_settle(&ofs->store, &in->o);
	if (in->o.nopen == 0 && in->nlookup == 0 && in->busy == 0 && in->o.m.ino != META_ROOT_INO) {
		ofs_object_remove(&ofs->store, &in->o);
		ofs_ifree(in);
	}
}

void ofs_iclose(struct ofs *ofs, struct ofs_inode *in)
{
	assert(in->o.nopen > 0);
	in->o.nopen--;
	ofs_isettle(ofs, in);
}

void ofs_iput(struct ofs *ofs, struct ofs_inode *in)
{
	if (!in)
		return;
	pthread_mutex_lock(&ofs->store.lock);
	assert(in->busy > 0);
	in->busy--;
	ofs_isettle(ofs, in);
	pthread_mutex_unlock(&ofs->store.lock);
}

void ofs_fill_stat(const struct ofs *ofs, const struct ofs_inode *in,
			  const struct meta_inode *m, struct stat *st)
{
	uint64_t size = m->size, npages = m->npages;

	if (in && in->o.obj && in->o.x) {
		/*
		 * Its writers' size; the blocks of its committed extents (its
		 * working states change under the stripe, which a getattr does
		 * not take).
		 */
		size = __atomic_load_n(&in->o.x->wsize, __ATOMIC_RELAXED);
	} else if (in && in->o.obj) {
		struct kvb_map view;

		kvb_obj_view(&ofs->store.kvb, in->o.obj, &view);
		size = view.size;
		npages = view.bucket >= 0 ? view.npages : 0;
	}
	memset(st, 0, sizeof(*st));
	st->st_ino = m->ino;
	st->st_mode = m->mode;
	/*
	 * A directory's count (2 + subdirectories) is kept by the store; one
	 * removed (rmdir, renamed over) while a handle still has it has none.
	 */
	if (in && in->o.unlinked)
		st->st_nlink = 0;
	else
		st->st_nlink = S_ISDIR(m->mode) ? (m->nlink >= 2 ? m->nlink : 2) : 1;
	st->st_uid = m->uid;
	st->st_gid = m->gid;
	st->st_size = (off_t)size;
	st->st_blksize = (blksize_t)ofs->store.geom.page_size;
	st->st_blocks = (blkcnt_t)(npages * ofs->store.geom.page_size / 512);
	st->st_atim.tv_sec = m->atime / 1000000000;
	st->st_atim.tv_nsec = m->atime % 1000000000;
	st->st_mtim.tv_sec = m->mtime / 1000000000;
	st->st_mtim.tv_nsec = m->mtime % 1000000000;
	st->st_ctim.tv_sec = m->ctime / 1000000000;
	st->st_ctim.tv_nsec = m->ctime % 1000000000;
}

/*
 * The release of a handle; direct: one that bypassed the kernel's cache.
 * A create's such handle that was the inode's only open since leaves no
 * page in the cache: the next reader may prefill it.  Under store.lock.
 */
int ofs_direct_close(struct ofs_inode *in, int direct)
{
	if (!direct)
		return 0;
	assert(in->ndirect > 0);
	if (--in->ndirect == 0 && in->kfresh == 3) {
		in->kfresh = 1;
		return 1;
	}
	return 0;
}

/* Count a kernel lookup of m and fill its entry.  Under store.lock. */
int ofs_entry(struct ofs *ofs, const struct meta_inode *m, struct fuse_entry_param *e)
{
	struct ofs_inode *in = ofs_iget_from(ofs, m);

	if (!in)
		return -ENOMEM;
	if (in->nlookup == 0)
		in->kfresh = 1; /* a new kernel inode: none of its pages are cached */
	in->nlookup++;
	memset(e, 0, sizeof(*e));
	e->ino = in->o.m.ino;
	e->attr_timeout = ofs->timeout;
	e->entry_timeout = ofs->timeout;
	ofs_fill_stat(ofs, in, &in->o.m, &e->attr);
	return 0;
}

void ofs_forget_one(struct ofs *ofs, fuse_ino_t ino, uint64_t n)
{
	struct ofs_inode *in = ofs_ifind(ofs, ino);

	if (!in)
		return;
	in->nlookup = in->nlookup > n ? in->nlookup - n : 0;
	ofs_isettle(ofs, in);
}
