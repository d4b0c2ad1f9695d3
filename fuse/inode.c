/*
 * inode.c: the inode table (the inodes the kernel knows or has open), a
 * request's hold on one, and the attributes and entries replied for them.
 * The table, the counts and an inode's fields are under store.lock but for
 * those annotated otherwise (ofs.h).
 */
#include "ofs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static size_t ofs_slot(const struct ofs *ofs, uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ULL) >> 20) & (ofs->tabsize - 1);
}

struct ofs_inode *ofs_ifind(struct ofs *ofs, uint64_t ino)
{
	struct ofs_inode *in;

	for (in = ofs->tab[ofs_slot(ofs, ino)]; in; in = in->next)
		if (in->ino == ino)
			return in;
	return NULL;
}

static int ofs_igrow(struct ofs *ofs)
{
	size_t oldsize = ofs->tabsize, i;
	struct ofs_inode **old = ofs->tab, **tab;

	tab = calloc(oldsize * 2, sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	ofs->tab = tab;
	ofs->tabsize = oldsize * 2;
	for (i = 0; i < oldsize; i++) {
		struct ofs_inode *in = old[i], *next;

		for (; in; in = next) {
			size_t s = ofs_slot(ofs, in->ino);

			next = in->next;
			in->next = tab[s];
			tab[s] = in;
		}
	}
	free(old);
	return 0;
}

/* The table's inode for m->ino, created from m when absent. */
static struct ofs_inode *ofs_iget_from(struct ofs *ofs, const struct meta_inode *m)
{
	struct ofs_inode *in = ofs_ifind(ofs, m->ino);
	size_t s;

	if (in)
		return in;
	if (ofs->tabcount >= ofs->tabsize && ofs_igrow(ofs))
		return NULL;
	in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	in->ino = m->ino;
	in->o.m = *m;
	s = ofs_slot(ofs, in->ino);
	in->next = ofs->tab[s];
	ofs->tab[s] = in;
	ofs->tabcount++;
	return in;
}

static void ofs_iremove(struct ofs *ofs, struct ofs_inode *in)
{
	struct ofs_inode **pp = &ofs->tab[ofs_slot(ofs, in->ino)];

	while (*pp && *pp != in)
		pp = &(*pp)->next;
	if (*pp)
		*pp = in->next;
	ofs->tabcount--;
	free(in->o.pcs);
	free(in);
}

int ofs_table_init(struct ofs *ofs)
{
	struct meta_inode root;
	struct ofs_inode *in;
	ofs->tabsize = 1024;
	ofs->tab = calloc(ofs->tabsize, sizeof(*ofs->tab));
	if (!ofs->tab || meta_get(ofs->store.meta, META_ROOT_INO, &root))
		return -ENOMEM;
	in = ofs_iget_from(ofs, &root);
	if (!in)
		return -ENOMEM;
	in->nlookup = 1;
	return 0;
}

void ofs_table_release(struct ofs *ofs)
{
	size_t i;

	for (i = 0; ofs->tab && i < ofs->tabsize; i++) {
		while (ofs->tab[i]) {
			struct ofs_inode *in = ofs->tab[i];

			ofs->tab[i] = in->next;
					free(in->o.pcs);
			free(in);
		}
	}
	free(ofs->tab);
	ofs->tab = NULL;
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
	struct ofs_store *s = &ofs->store;

	if (in->nopen == 0 && in->unlinked == 2) {
		struct kvb_map map = ofs_committed(&in->o.m);
		int ret = map.bucket >= 0 ? kvb_remove_prepare(&s->kvb, &map) : 0;

		if (!ret)
			ret = meta_delete(s->meta, in->ino);

		if (ret)
			ofs_log("cannot delete unlinked inode %llu: %s (recovered at next mount)",
				(unsigned long long)in->ino, meta_errmsg(s->meta));
		else if (map.bucket >= 0)
			kvb_remove(&s->kvb, &map);
		in->unlinked = 1;
	}
	if (in->nopen == 0 && in->nlookup == 0 && in->busy == 0 && in->ino != META_ROOT_INO)
		ofs_iremove(ofs, in);
}

void ofs_iput(struct ofs *ofs, struct ofs_inode *in)
{
	if (!in)
		return;
	pthread_mutex_lock(&ofs->store.lock);
	in->busy--;
	ofs_isettle(ofs, in);
	pthread_mutex_unlock(&ofs->store.lock);
}

void ofs_fill_stat(const struct ofs *ofs, const struct ofs_inode *in,
			  const struct meta_inode *m, struct stat *st)
{
	uint64_t size = m->size, npages = m->npages;

	if (in && in->o.obj) {
		struct kvb_map view;

		kvb_obj_view(&ofs->store.kvb, in->o.obj, &view);
		size = view.size;
		npages = view.bucket >= 0 ? view.npages : 0;
	}
	memset(st, 0, sizeof(*st));
	st->st_ino = m->ino;
	st->st_mode = m->mode;
	/* A directory's count (2 + subdirectories) is kept by the store. */
	st->st_nlink = S_ISDIR(m->mode) ? (m->nlink >= 2 ? m->nlink : 2)
					: (in && in->unlinked ? 0 : 1);
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
	e->ino = in->ino;
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
