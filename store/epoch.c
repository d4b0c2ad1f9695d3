/*
 * epoch.c: the epoch table (epoch.h).  The bumps run under s->lock, where
 * the change they announce is made, so a descriptor read under that lock
 * with its (gen, epoch) is either current or already stale; the pages a
 * change frees wait for the next barrier, after the bump.
 */
#include "store_int.h"
#include "epoch.h"
#include "offloadfs_batch_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int ofs_epochs_open(struct ofs_store *s, const struct ofs_config *cfg, char *err, size_t errlen)
{
	struct ofs_batch_epochs *t;
	struct stat st;
	int fd, ret;

	(void)cfg; /* its mode is set with the bucket files' (store_set_modes) */
	s->epochs = NULL;
	fd = openat(s->lock_fd, OFS_BATCH_EPOCH_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
		    0600);
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    ((size_t)st.st_size != sizeof(*t) && ftruncate(fd, sizeof(*t)))) {
		ret = -errno;
		snprintf(err, errlen, "%s/%s: %s", s->root, OFS_BATCH_EPOCH_NAME,
			 fd < 0 || errno ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return ret ? ret : -EINVAL;
	}
	t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ret = t == MAP_FAILED ? -errno : 0;
	close(fd);
	if (ret) {
		snprintf(err, errlen, "%s/%s: cannot map it: %s", s->root, OFS_BATCH_EPOCH_NAME,
			 strerror(-ret));
		return ret;
	}
	/* New, or not ours: every slot starts again; gen too, bumped past anything seen. */
	if (t->magic != OFS_BATCH_EPOCH_MAGIC) {
		memset(t, 0, sizeof(*t));
		t->magic = OFS_BATCH_EPOCH_MAGIC;
	}
	__atomic_add_fetch(&t->gen, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&t->live, 1, __ATOMIC_SEQ_CST);
	s->epochs = t;
	return 0;
}

void ofs_epochs_close(struct ofs_store *s)
{
	struct ofs_batch_epochs *t = s->epochs;

	if (!t)
		return;
	__atomic_store_n(&t->live, 0, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&t->gen, 1, __ATOMIC_SEQ_CST);
	munmap(t, sizeof(*t));
	s->epochs = NULL;
}

void ofs_epochs_bump(struct ofs_store *s, uint64_t ino)
{
	if (s->epochs)
		__atomic_add_fetch(&s->epochs->slot[ino % OFS_BATCH_EPOCH_SLOTS], 1,
				   __ATOMIC_SEQ_CST);
}

void ofs_epochs_bump_all(struct ofs_store *s)
{
	if (s->epochs)
		__atomic_add_fetch(&s->epochs->gen, 1, __ATOMIC_SEQ_CST);
}

void ofs_epochs_get(const struct ofs_store *s, uint64_t ino, uint64_t *gen, uint64_t *epoch)
{
	*gen = 0;
	*epoch = 0;
	if (!s->epochs)
		return;
	*gen = __atomic_load_n(&s->epochs->gen, __ATOMIC_SEQ_CST);
	*epoch = __atomic_load_n(&s->epochs->slot[ino % OFS_BATCH_EPOCH_SLOTS], __ATOMIC_SEQ_CST);
}
